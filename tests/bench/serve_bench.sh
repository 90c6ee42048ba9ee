#!/usr/bin/env bash
# serve_bench: wrk against the broker of the local cluster (deploy/local/run.sh must be running):
# cached queries (one query repeated), uncached queries (distinct queries drawn from the corpus,
# each sent once), and the broker's own overhead per query (broker latency minus the leaves' query
# time, from their Prometheus histograms). Needs wrk (apt install wrk).
# usage: tests/bench/serve_bench.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10} connections=${2:-16}
broker=http://127.0.0.1:${WARP_BROKER_PORT:-8080}
command -v wrk > /dev/null || { echo "serve_bench: wrk is not installed (apt install wrk)" >&2; exit 1; }
curl -sf "$broker/readyz" > /dev/null || { echo "serve_bench: no ready broker at $broker (deploy/local/run.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 200,000 distinct queries of 1-4 words drawn from random documents of the corpus.
python3 - data/corpus/gcide.jsonl "$work/queries.txt" <<'PY'
import json, random, re, sys, urllib.parse
random.seed(5)
docs = [json.loads(l) for l in open(sys.argv[1])]
seen, out = set(), open(sys.argv[2], "w")
while len(seen) < 200000:
    words = re.findall(r"[a-z]{3,}", random.choice(docs)["body"].lower())
    if len(words) < 4: continue
    q = " ".join(random.sample(words, random.randint(1, 4)))
    if q in seen: continue
    seen.add(q)
    out.write("/search?k=10&q=" + urllib.parse.quote_plus(q) + "\n")
PY
cat > "$work/uncached.lua" <<LUA
local paths = {}
for line in io.lines("$work/queries.txt") do paths[#paths + 1] = line end
local counter = 0
local thread_id = 0
setup = function(thread) thread:set("offset", thread_id * 100000); thread_id = thread_id + 1 end
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(offset + counter) % #paths + 1])
end
LUA

scrape() { curl -s "$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
leaf_sum() { for p in 9201 9202 9203 9204; do curl -s "http://127.0.0.1:$p/metrics"; done | awk -v m="$1" '$1 == m { s += $2 } END { print s + 0 }'; }

echo "## cached: one query repeated"
wrk -t2 -c"$connections" -d"${seconds}s" --latency "$broker/search?q=striped+african+horse&k=10" | tee "$work/cached.txt"
b_sum0=$(scrape "$broker" warpsearch_broker_request_seconds_sum); b_n0=$(scrape "$broker" warpsearch_broker_request_seconds_count)
l_sum0=$(leaf_sum 'warpsearch_leaf_query_seconds_sum{processor="cpu"}'); l_n0=$(leaf_sum 'warpsearch_leaf_query_seconds_count{processor="cpu"}')
echo "## uncached: distinct queries"
wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$work/uncached.lua" "$broker" | tee "$work/uncached.txt"
b_sum1=$(scrape "$broker" warpsearch_broker_request_seconds_sum); b_n1=$(scrape "$broker" warpsearch_broker_request_seconds_count)
l_sum1=$(leaf_sum 'warpsearch_leaf_query_seconds_sum{processor="cpu"}'); l_n1=$(leaf_sum 'warpsearch_leaf_query_seconds_count{processor="cpu"}')
python3 - "$b_sum0" "$b_n0" "$b_sum1" "$b_n1" "$l_sum0" "$l_n0" "$l_sum1" "$l_n1" <<'PY'
import sys
b_sum0, b_n0, b_sum1, b_n1, l_sum0, l_n0, l_sum1, l_n1 = map(float, sys.argv[1:])
broker_ms = (b_sum1 - b_sum0) / max(1, b_n1 - b_n0) * 1000
leaf_queries = l_n1 - l_n0
leaf_ms = (l_sum1 - l_sum0) / max(1, leaf_queries) * 1000
print("## broker overhead (uncached run, from the services' histograms)")
print("mean broker latency per query: %.3f ms; mean leaf query time: %.3f ms (%d partition queries for %d broker queries);" % (
    broker_ms, leaf_ms, leaf_queries, b_n1 - b_n0))
print("broker overhead per query (fan-out, ZeroMQ round trips, merge, JSON; HTTP parsing excluded): %.3f ms" % (broker_ms - leaf_ms))
PY
