#!/usr/bin/env bash
# edge_bench: the broker's HTTP edge under load, everything on this machine on loopback: 4 leaves
# (2 partitions x 2 replicas) over INDEX_DIR, then for each broker binary in BIN_DIR (warp-broker,
# and warp-broker-before if present, for a side-by-side with an older build): uncached queries
# (1-4 random words of WORDS per request) at 16 and 64 connections, one cached query at 16, a probe
# connection beside IDLE idle ones, and the broker's overhead per uncached query (the broker's
# mean request time minus the leaves' mean query time, from their Prometheus histograms).
# Uncached queries are --distinct: each holds a term of its own, so none is answered from the cache
# (EDGE_DISTINCT= (empty) loads without it, so that the warm-up's queries come back as cache hits).
# Prints Markdown tables; needs only the binaries and python3.
# usage: tests/bench/edge_bench.sh BIN_DIR INDEX_DIR WORDS [SECONDS] [IDLE]
set -uo pipefail
bin=$1 index=$2 words=$3 seconds=${4:-10} idle=${5:-10000}
distinct=${EDGE_DISTINCT---distinct}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=tests/bench/edge_cluster.sh
. "$(dirname "$0")/edge_cluster.sh"
start_edge_leaves "$bin" "$index" "$work"
scrape() { python3 "$(dirname "$0")/edge_metrics.py" scrape "$1" 9301 9302 9303 9304; }
echo "| broker | load | connections | idle connections | answers | q/s | p50 ms | p90 ms | p99 ms | max ms | not 200 | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
overheads=()
for broker in warp-broker warp-broker-before; do
  [ -x "$bin/$broker" ] || continue
  port=8181
  extra=()
  [ $broker = warp-broker ] && extra=(--max-connections 20000)  # I/O threads: one per core
  [ $broker = warp-broker-before ] && extra=(--threads 16)
  "$bin/$broker" --listen 127.0.0.1:$port --partition 0=tcp://127.0.0.1:5801,tcp://127.0.0.1:5802 \
    --partition 1=tcp://127.0.0.1:5803,tcp://127.0.0.1:5804 "${extra[@]}" 2> "$work/$broker.log" &
  bpid=$!
  wait_edge_ready $port
  "$bin/http_load" --address 127.0.0.1:$port --words "$words" --connections 16 --seconds 2 $distinct > /dev/null  # warm-up
  before=$(scrape $port)
  "$bin/http_load" --address 127.0.0.1:$port --words "$words" --connections 16 --seconds "$seconds" $distinct --label "$broker | uncached"
  after=$(scrape $port)
  overheads+=("$(python3 "$(dirname "$0")/edge_metrics.py" overhead "$broker" "$before" "$after")")
  "$bin/http_load" --address 127.0.0.1:$port --words "$words" --connections 64 --seconds "$seconds" $distinct --label "$broker | uncached"
  "$bin/http_load" --address 127.0.0.1:$port --target "/search?k=10&q=striped+african+horse" --connections 16 \
    --threads 16 --seconds "$seconds" --label "$broker | cached"
  probe_idle=$idle
  [ $broker = warp-broker-before ] && probe_idle=40  # the thread-per-connection server: 40 already starve it
  "$bin/http_load" --address 127.0.0.1:$port --words "$words" --connections 1 --idle "$probe_idle" --seconds "$seconds" $distinct \
    --label "$broker | probe beside idle"
  kill -TERM $bpid; wait $bpid 2>/dev/null
done
echo
echo "| broker | broker ms per uncached query (mean) | leaf query ms (mean) | broker overhead ms | stages ms: broker / transport / leaf |"
echo "|---|---|---|---|---|"
printf '%s\n' "${overheads[@]}"
