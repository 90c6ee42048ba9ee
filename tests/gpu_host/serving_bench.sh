#!/usr/bin/env bash
# On the 16-core GPU host, with a bundle made by prepare.sh: the serving benchmark
# (tests/bench/edge_bench.sh: 4 leaves over the default corpus in 2 partitions, the broker,
# http_load with distinct uncached queries at 16 and 64 connections, cached queries, a probe beside
# 10,000 idle connections, the broker's overhead by stage). With BEFORE=BUNDLE2 the same runs for
# that build first, then this one, ROUNDS times in turn. Tables into OUT/serving.md.
# usage: [BEFORE=BUNDLE2] [ROUNDS=N] tests/gpu_host/serving_bench.sh BUNDLE OUT [SECONDS] [IDLE]
set -uo pipefail
bundle=$(realpath "${1:?usage: serving_bench.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: serving_bench.sh BUNDLE OUT}")
seconds=${3:-10} idle=${4:-10000}
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
tr -c 'a-z\n' ' ' < "$work/gcide.jsonl" | tr ' ' '\n' | awk 'length($0) > 2' | sort -u > "$work/words.txt"
"$bin/warp-indexer" build --input "$work/gcide.jsonl" --out "$work/index" --partitions 2 --quiet
status=0
for round in $(seq "${ROUNDS:-1}"); do
  for b in ${BEFORE:+"$(realpath "$BEFORE")"} "$bundle"; do
    label=$([ "$b" = "$bundle" ] && echo "this build" || echo "before")
    echo "== $label, round $round" | tee -a "$out/serving.md"
    bash tests/bench/edge_bench.sh "$b/bin" "$work/index" "$work/words.txt" "$seconds" "$idle" 2>&1 | tee -a "$out/serving.md" || status=1
  done
done
rm -rf "$work"
exit $status
