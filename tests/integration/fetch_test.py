#!/usr/bin/env python3
"""Stored documents, snippets and the fetch phase through the broker, with the real binaries on
loopback (warp-indexer serve with --write and --tail over Cranfield, two leaves tailing it, a broker
with --indexer): a search with snippet=body and source=true gives every hit of the page its stored
document (the input line, byte for byte, in GET /indexes/default/documents/{id}) and a snippet that
is a passage of its body with the query's words highlighted and the text escaped; only the page's
hits are fetched (the leaves' fetched-documents counter moves by k, not by each leaf's k); answers
without those parameters are as before; bad parameters get 400 with a reason; documents written,
replaced and deleted through the API are read back (read-your-writes with after=) as written.
usage: fetch_test.py BUILD_DIR CRANFIELD_DIR"""
import html, json, os, re, sys, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster, http_method  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-fetch-")
fail = h.fail
TOKEN = "fetch-token-1"


def collapse(text):
    return re.sub(r"\s+", " ", text).strip()


try:
    cluster = WritesCluster(h, data, TOKEN)
    lines = {}
    with open(os.path.join(data, "docs.jsonl")) as f:
        for line in f:
            if line.strip():
                lines[json.loads(line)["id"]] = line.rstrip("\n")
    leaf_ports = [int(re.search(r"--http.(127\.0\.0\.1:)?(\d+)", " ".join(map(str, p.args))).group(2))
                  for p in cluster.leaves]

    def fetched_total():
        total = 0
        for port in leaf_ports:
            for line in http_method("GET", "http://127.0.0.1:%d/metrics" % port)[1].splitlines():
                if line.startswith("warpsearch_leaf_fetched_documents_total "):
                    total += float(line.split()[1])
        return total

    def search(**params):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(params), timeout=30)
        if status != 200:
            fail("search %s: %d %s" % (params, status, body[:300]))
        return json.loads(body)

    def check_snippet(hit, words, pre="<em>", post="</em>"):
        """The snippet is a passage of the hit's body, escaped, its marked words the query's."""
        snippet = hit.get("snippet")
        if snippet is None:
            fail("hit %s has no snippet" % hit["id"])
        marked = re.findall(re.escape(pre) + "(.*?)" + re.escape(post), snippet)
        if not marked:
            fail("hit %s: nothing highlighted in %r" % (hit["id"], snippet))
        for word in marked:
            if not any(html.unescape(word).lower().startswith(w) for w in words):
                fail("hit %s: %r highlighted, not a query word (%r)" % (hit["id"], word, snippet))
        plain = snippet.replace(pre, "").replace(post, "")
        if re.search(r"<(?!/?em>)", plain):
            fail("hit %s: markup in the text: %r" % (hit["id"], snippet))
        plain = html.unescape(plain).strip("…")
        body = json.loads(hit["source"])["body"] if "source" in hit else json.loads(lines[hit["id"]])["body"]
        if collapse(plain) not in collapse(body):
            fail("hit %s: the snippet %r is not a passage of its body" % (hit["id"], plain))
        if len(plain) > 160:
            fail("hit %s: a snippet of %d characters (160 asked)" % (hit["id"], len(plain)))

    # A page with snippets and stored documents: each hit's source is its input line, as given.
    before = fetched_total()
    first = search(q="boundary layer flow", k=5, snippet="body", source="true")
    if len(first["hits"]) != 5 or first["partial"]:
        fail("the first page: %s" % json.dumps(first)[:500])
    for hit in first["hits"]:
        if json.dumps(hit["source"], separators=(",", ":")) != json.dumps(json.loads(lines[hit["id"]]), separators=(",", ":")):
            fail("hit %s: source %s is not its input line %s" % (hit["id"], hit["source"], lines[hit["id"]]))
        hit["source"] = json.dumps(hit["source"])
        check_snippet(hit, ("boundar", "layer", "flow"))
    # Only the page's hits were fetched: 5, though each leaf returned its own top 5.
    h.wait_until(lambda: fetched_total() - before == 5, 10, "the leaves to count the 5 documents fetched")
    second = search(q="boundary layer flow", k=5, offset=5, snippet="body")
    if [x["id"] for x in second["hits"]] != [x["id"] for x in search(q="boundary layer flow", k=10)["hits"]][5:]:
        fail("the second page's hits differ from the ranking's")
    for hit in second["hits"]:
        check_snippet(hit, ("boundar", "layer", "flow"))
        if "source" in hit:
            fail("a source without source=true")
    h.wait_until(lambda: fetched_total() - before == 10, 10, "the second page fetched alone")

    # Without those parameters the answer is as before, and nothing is fetched.
    plain = search(q="boundary layer flow", k=5)
    if any(sorted(hit) != ["id", "score", "title", "url"] for hit in plain["hits"]):
        fail("a plain search's hits carry more than before: %s" % plain["hits"][0])
    if [(x["id"], x["score"]) for x in plain["hits"]] != [(x["id"], x["score"]) for x in first["hits"]]:
        fail("the fetch phase changed the ranking")
    if fetched_total() - before != 10:
        fail("a plain search fetched documents")

    # Tags: none, or the caller's.
    bare = search(q="slipstream", k=3, snippet="body", highlight="false")
    if any("<em>" in x["snippet"] or not x["snippet"] for x in bare["hits"]):
        fail("highlight=false: %s" % bare["hits"])
    custom = search(q="slipstream", k=3, snippet="body", highlight_pre="[[", highlight_post="]]")
    check_snippet(custom["hits"][0], ("slipstream",), "[[", "]]")
    short = search(q="slipstream", k=3, snippet="body", snippet_length=30)
    if any(len(html.unescape(re.sub("</?em>", "", x["snippet"])).strip("…")) > 30 for x in short["hits"]):
        fail("snippet_length=30 not kept: %s" % [x["snippet"] for x in short["hits"]])
    # A field the documents lack: no snippet, the hits still there.
    none = search(q="slipstream", k=3, snippet="abstract")
    if not none["hits"] or any("snippet" in x for x in none["hits"]):
        fail("a snippet of a field the documents lack: %s" % none["hits"])

    # Bad parameters: 400 with a reason.
    for params, why in ((dict(snippet_length=0), "snippet_length"), (dict(snippet_length=2001), "snippet_length"),
                        (dict(snippet_length="abc"), "snippet_length"), (dict(highlight_pre="x" * 65), "highlight_pre"),
                        (dict(highlight="maybe"), "highlight"), (dict(source="yes"), "source"),
                        (dict(snipet="body"), "accepted")):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(dict(q="wing", snippet="body", **params)))
        if status != 400 or why not in json.loads(body).get("error", ""):
            fail("%s: %d %s (a 400 naming %s expected)" % (params, status, body[:200], why))
    status, body, _ = cluster.call("POST", "/search", json.dumps({"q": "wing", "snippet": 3}).encode())
    if status != 400:
        fail("POST with a snippet that is not a string: %d %s" % (status, body))
    status, body, _ = cluster.call("POST", "/search", json.dumps({"q": "wing", "snippet": "body", "source": True}).encode())
    if status != 200 or "source" not in json.loads(body)["hits"][0]:
        fail("POST with snippet and source: %d %s" % (status, body[:300]))

    # Reads by id: the stored document as given.
    for doc_id in ("1", "17", "1400"):
        status, body, _ = cluster.call("GET", "/indexes/default/documents/" + doc_id)
        if status != 200 or body != lines[doc_id]:
            fail("GET document %s: %d %r (the input line %r)" % (doc_id, status, body[:200], lines[doc_id][:200]))
    for path, code in (("/indexes/default/documents/no-such-doc", 404), ("/indexes/default/documents/1?after=x", 400),
                       ("/indexes/default/documents/1?colour=red", 400)):
        status, body, _ = cluster.call("GET", path)
        if status != code:
            fail("GET %s: %d %s (%d expected)" % (path, status, body[:200], code))

    # Written through the API: read back at once (after=), replaced, deleted; input documents too.
    def put(doc_id, document):
        status, body, _ = cluster.call("PUT", "/indexes/default/documents/" + doc_id, json.dumps(document).encode())
        if status not in (200, 201):
            fail("PUT %s: %d %s" % (doc_id, status, body))
        return json.loads(body)["sequence"]

    def get(doc_id, after):
        return cluster.call("GET", "/indexes/default/documents/%s?after=%d" % (doc_id, after), timeout=30)[:2]

    doc = {"id": "live-1", "title": "written", "body": "zyxunique words <b>bold</b> & more", "lang": "en",
           "year": 1990, "tags": {"a": [1, 2]}}  # fields beyond the indexed ones: stored as given
    sequence = put("live-1", doc)
    status, body = get("live-1", sequence)
    if status != 200 or json.loads(body) != doc:
        fail("GET of a written document: %d %s" % (status, body))
    hits = search(q="zyxunique", k=3, snippet="body", source="true", after=sequence)["hits"]
    if [x["id"] for x in hits] != ["live-1"] or hits[0]["source"] != doc or \
            hits[0]["snippet"] != "<em>zyxunique</em> words &lt;b&gt;bold&lt;/b&gt; &amp; more":
        fail("a written document's hit: %s" % hits)
    replaced = {"id": "live-1", "body": "replaced text"}
    status, body = get("live-1", put("live-1", replaced))
    if status != 200 or json.loads(body) != replaced:
        fail("GET after a replace: %d %s" % (status, body))
    status, body = get("3", put("3", {"id": "3", "body": "an input document replaced"}))
    if status != 200 or json.loads(body)["body"] != "an input document replaced":
        fail("GET of a replaced input document: %d %s" % (status, body))
    for doc_id in ("live-1", "2"):
        status, body, _ = cluster.call("DELETE", "/indexes/default/documents/" + doc_id)
        if status != 200:
            fail("DELETE %s: %d %s" % (doc_id, status, body))
        status, body = get(doc_id, json.loads(body)["sequence"])
        if status != 404:
            fail("GET of deleted %s: %d %s" % (doc_id, status, body))
    print("fetch_test: snippets, stored documents, the fetch phase and reads by id passed")
finally:
    h.cleanup()
