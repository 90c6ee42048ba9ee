#include "broker/search_page.hpp"

namespace warp {
namespace {

// Everything inline: no script, style sheet or font from elsewhere (the page works offline, and
// its Content-Security-Policy forbids loading any).
constexpr const char* kPage = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Warpsearch</title>
<link rel="icon" href="data:,">
<style>
[hidden] { display: none !important; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
header { background: #16213a; color: #fff; padding: 12px 24px; display: flex; gap: 18px; align-items: center; flex-wrap: wrap; }
header h1 { font-size: 18px; margin: 0; font-weight: 650; letter-spacing: .3px; }
header a { color: #b8c7ff; font-size: 13px; margin-left: auto; }
form { display: flex; flex: 1; gap: 8px; max-width: 760px; min-width: 280px; }
input[type=search], input[type=password] { flex: 1; padding: 8px 12px; font-size: 16px; border-radius: 6px; border: 1px solid #c9ced8; }
select { border-radius: 6px; border: 1px solid #c9ced8; padding: 0 6px; font-size: 14px; }
button { padding: 8px 14px; border-radius: 6px; border: 0; background: #3d6df2; color: #fff; font-size: 15px; cursor: pointer; }
button:disabled { background: #aab6d6; cursor: default; }
main { max-width: 840px; margin: 0 auto; padding: 18px 24px 40px; }
#status { color: #5b6475; font-size: 13px; margin-bottom: 10px; min-height: 18px; }
.notice { background: #fff4e0; border: 1px solid #f0b44c; color: #6e4300; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
.failure { background: #fdecec; border-color: #e58080; color: #7d1d1d; }
.hit { background: #fff; border: 1px solid #e3e6ec; border-radius: 8px; padding: 12px 14px; margin-bottom: 10px; }
.hit h2 { font-size: 16px; margin: 0 0 3px; font-weight: 600; }
.hit h2 a { color: #2346b8; text-decoration: none; }
.hit .meta { font-size: 12px; color: #7a8394; }
.hit .snippet { margin-top: 5px; color: #30384a; overflow-wrap: anywhere; }
.snippet em { font-style: normal; font-weight: 600; background: #ffe98a; border-radius: 2px; padding: 0 1px; }
nav { display: flex; gap: 10px; align-items: center; margin-top: 14px; }
nav span { color: #5b6475; font-size: 13px; }
#facets { background: #fff; border: 1px solid #e3e6ec; border-radius: 8px; padding: 8px 12px; margin-bottom: 12px; font-size: 13px; }
.facet { margin: 3px 0; }
.facet .field { color: #5b6475; font-weight: 600; margin-right: 6px; }
.facet button, #filters button { padding: 2px 8px; margin: 2px 4px 2px 0; font-size: 13px; border-radius: 12px; background: #e8edfb; color: #23408f; }
.facet button .count { color: #6b7487; margin-left: 4px; }
#filters button { background: #3d6df2; color: #fff; }
</style>
</head>
<body>
<header>
  <h1>Warpsearch</h1>
  <form id="search" role="search">
    <input id="q" type="search" name="q" placeholder="Search the index" autocomplete="off" autofocus>
    <select id="mode" aria-label="mode"><option value="or">any word</option><option value="and">all words</option><option value="andor">all, else any</option></select>
    <button id="go" type="submit">Search</button>
  </form>
  <a id="cluster" href="/cluster">cluster state</a>
</header>
<main>
  <form id="token" class="notice" hidden>This broker needs a token:
    <input id="token-value" type="password" placeholder="bearer token"> <button type="submit">Use it</button></form>
  <div id="partial" class="notice" role="alert" hidden></div>
  <div id="error" class="notice failure" role="alert" hidden></div>
  <div id="status"></div>
  <div id="filters" hidden></div>
  <div id="facets" hidden></div>
  <div id="hits"></div>
  <nav id="pages" hidden><button id="prev" type="button">&larr; Previous</button><span id="page"></span><button id="next" type="button">Next &rarr;</button></nav>
</main>
<script>
"use strict";
const K = 10, MAX_K = 1000;
const $ = (id) => document.getElementById(id);
let state = { q: "", mode: "or", offset: 0, filters: [] };

function fromHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  state = { q: p.get("q") || "", mode: p.get("mode") || "or", offset: Math.max(0, parseInt(p.get("offset") || "0", 10) || 0),
            filters: p.getAll("filter") };
  $("q").value = state.q;
  $("mode").value = state.mode;
}

function show(id, text) { $(id).textContent = text; $(id).hidden = !text; }

function hitElement(hit) {
  const div = document.createElement("div");
  div.className = "hit";
  const h2 = document.createElement("h2");
  const title = hit.title || hit.id;
  if (/^https?:\/\//.test(hit.url)) {
    const a = document.createElement("a");
    a.href = hit.url;
    a.textContent = title;
    h2.appendChild(a);
  } else {
    h2.textContent = title;
  }
  div.appendChild(h2);
  if (hit.snippet !== undefined) {
    const snippet = document.createElement("div");
    snippet.className = "snippet";
    snippet.innerHTML = hit.snippet;  // escaped by the server; its only markup the <em> asked for
    div.appendChild(snippet);
  }
  const meta = document.createElement("div");
  meta.className = "meta";
  meta.textContent = hit.id + " \u00b7 score " + hit.score.toFixed(3);
  div.appendChild(meta);
  return div;
}

async function run() {
  show("error", ""); show("partial", "");
  if (!state.q) { $("hits").replaceChildren(); $("pages").hidden = true; show("status", ""); return; }
  const params = new URLSearchParams({ q: state.q, k: K, offset: state.offset, mode: state.mode,
                                       snippet: "body", snippet_length: 220, facets: "*", facet_size: 8 });
  for (const f of state.filters) params.append("filter", f);
  const headers = {};
  const token = sessionStorage.getItem("warp-token");
  if (token) headers.Authorization = "Bearer " + token;
  $("go").disabled = true;
  show("status", "Searching\u2026");
  try {
    const response = await fetch("/search?" + params, { headers });
    const body = await response.json();
    if (response.status === 401) { $("token").hidden = false; show("status", ""); return; }
    if (response.status !== 200) { show("error", body.error || ("error " + response.status)); show("status", ""); return; }
    render(body);
  } catch (e) {
    show("error", "The broker did not answer: " + e.message);
    show("status", "");
  } finally {
    $("go").disabled = false;
  }
}

// A facet value as a filter: a keyword quoted, a number compared.
function facetFilter(field, value, numeric) {
  return numeric ? field + "=" + value : field + ':"' + value.replace(/[\\"]/g, (c) => "\\" + c) + '"';
}

function renderFacets(body) {
  const chips = state.filters.map((f) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = f + " \u00d7";
    b.title = "remove this filter";
    b.addEventListener("click", () => { state.filters = state.filters.filter((x) => x !== f); go(0); });
    return b;
  });
  $("filters").replaceChildren(...chips);
  $("filters").hidden = chips.length === 0;
  const rows = [];
  for (const [field, facet] of Object.entries(body.facets || {})) {
    if (!facet.values.length) continue;
    const row = document.createElement("div");
    row.className = "facet";
    const name = document.createElement("span");
    name.className = "field";
    name.textContent = field;
    row.appendChild(name);
    for (const v of facet.values) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.field = field;
      b.dataset.value = v.value;
      b.appendChild(document.createTextNode(v.value));
      const count = document.createElement("span");
      count.className = "count";
      count.textContent = v.count;
      b.appendChild(count);
      const numeric = facet.type === "numeric";
      b.addEventListener("click", () => {
        const f = facetFilter(field, v.value, numeric);
        if (!state.filters.includes(f)) state.filters.push(f);
        go(0);
      });
      row.appendChild(b);
    }
    rows.push(row);
  }
  $("facets").replaceChildren(...rows);
  $("facets").hidden = rows.length === 0;
}

function render(body) {
  renderFacets(body);
  $("hits").replaceChildren(...body.hits.map(hitElement));
  const first = state.offset + 1, last = state.offset + body.hits.length;
  show("status", (body.hits.length ? "Results " + first + "\u2013" + last : "No results") +
       " \u00b7 " + body.took_ms.toFixed(1) + " ms" + (body.cached ? " (cached)" : ""));
  if (body.partial) {
    const missing = body.partitions.filter((p) => p.status !== "ok").map((p) => p.partition + " (" + p.status + ")");
    show("partial", "Partial answer: " + (missing.length ? "partition " + missing.join(", ") + " did not answer"
                                                         : "some hits lack their snippets") +
                    "; results may be missing.");
  }
  $("pages").hidden = state.offset === 0 && body.hits.length < K;
  $("prev").disabled = state.offset === 0;
  $("next").disabled = body.hits.length < K || state.offset + 2 * K > MAX_K;
  $("page").textContent = "Page " + (state.offset / K + 1);
}

function go(offset) {
  state.offset = offset;
  const p = new URLSearchParams({ q: state.q, mode: state.mode, offset: state.offset });
  for (const f of state.filters) p.append("filter", f);
  const hash = "#" + p.toString();
  if (location.hash === hash) return run();  // the same search again: no hashchange
  location.hash = hash;
}

$("search").addEventListener("submit", (e) => {
  e.preventDefault();
  state.q = $("q").value.trim();
  state.mode = $("mode").value;
  state.filters = [];
  go(0);
});
$("prev").addEventListener("click", () => go(Math.max(0, state.offset - K)));
$("next").addEventListener("click", () => go(state.offset + K));
$("token").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("warp-token", $("token-value").value);
  $("token").hidden = true;
  run();
});
window.addEventListener("hashchange", () => { fromHash(); run(); });
fromHash();
run();
</script>
</body>
</html>
)PAGE";

}  // namespace

const std::string& search_page_html() {
  static const std::string page(kPage);
  return page;
}

}  // namespace warp
