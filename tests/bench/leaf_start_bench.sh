#!/usr/bin/env bash
# leaf_start_bench: seconds from starting warp-leaf (--processor cpu) over INDEX to its /readyz
# answering 200, i.e. the index opened, checked and in memory: what a restart or a followed
# generation waits for. Each LABEL=BINARY in turn, ROUNDS times (alternating, so that a machine's
# drift does not enter the comparison); one Markdown row per start.
# usage: tests/bench/leaf_start_bench.sh INDEX ROUNDS LABEL=BINARY...
set -uo pipefail
index=$1 rounds=$2
shift 2
echo "| binary | round | seconds to ready | peak RSS MiB |"
echo "|---|---:|---:|---:|"
for round in $(seq "$rounds"); do
  for pair in "$@"; do
    label=${pair%%=*} bin=${pair#*=}
    start=$(date +%s.%N)
    "$bin" --index "$index" --listen tcp://127.0.0.1:47311 --http 127.0.0.1:47312 --processor cpu 2> /tmp/leaf_start_bench.log &
    pid=$!
    until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:47312/readyz', timeout=1)" 2> /dev/null; do
      kill -0 $pid 2> /dev/null || { echo "$label: the leaf exited"; cat /tmp/leaf_start_bench.log; exit 1; }
      sleep 0.02
    done
    end=$(date +%s.%N)
    rss=$(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$pid/status)
    kill $pid
    wait $pid 2> /dev/null
    awk -v l="$label" -v r="$round" -v s="$start" -v e="$end" -v m="$rss" 'BEGIN { printf "| %s | %s | %.2f | %s |\n", l, r, e - s, m }'
  done
done
