#!/usr/bin/env bash
# On the GPU host, with a bundle made by prepare.sh: phrase_bench on Cranfield and CISI (positions'
# bytes and decode speed, phrases against Xapian's OP_PHRASE on one core), then what positions cost
# a parallel build of the default corpus: warp-indexer build with and without --no-positions, the
# median of three each, and the partitions' sizes. Tables land in OUT/phrase_bench.md.
# usage: tests/gpu_host/phrase_bench.sh BUNDLE OUT
set -uo pipefail
bundle=$(realpath "${1:?usage: phrase_bench.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: phrase_bench.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
{
  taskset -c 2 "$bin/phrase_bench" "$bundle/data/cranfield/docs.jsonl" "$bundle/data/cisi/docs.jsonl"
  gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
  echo
  echo "| default corpus, 4 partitions | build s (median of 3) | index MB |"
  echo "|---|---|---|"
  for flags in "" "--no-positions"; do
    times=()
    for run in 1 2 3; do
      rm -rf "$work/index"
      start=$(date +%s%N)
      "$bin/warp-indexer" build --input "$work/gcide.jsonl" --out "$work/index" --partitions 4 --quiet $flags
      times+=("$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.2f", ns / 1e9 }')")
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
    echo "| ${flags:-with positions} | $median | $(du -sm "$work/index" | cut -f1) |"
  done
} 2>&1 | tee "$out/phrase_bench.md"
status=${PIPESTATUS[0]}
rm -rf "$work"
exit "$status"
