#!/usr/bin/env bash
# On the 16-core host, with a bundle made by prepare.sh: the memory soak (tests/bench/memory_soak.sh:
# 4 leaves over the default corpus in 2 partitions and the broker; two million distinct uncached
# queries, ten minutes of the slow-body attack, a minute after; RSS each second against the
# documented bounds). Into OUT: memory-soak.md, .csv and .png (the plot where matplotlib is there).
# usage: tests/gpu_host/memory_soak.sh BUNDLE OUT [QUERIES] [ATTACK_SECONDS] [AFTER_SECONDS]
set -uo pipefail
bundle=$(realpath "${1:?usage: memory_soak.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: memory_soak.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
tr -c 'a-z\n' ' ' < "$work/gcide.jsonl" | tr ' ' '\n' | awk 'length($0) > 2' | sort -u > "$work/words.txt"
"$bin/warp-indexer" build --input "$work/gcide.jsonl" --out "$work/index" --partitions 2 --quiet
du -sm "$work/index"/part-* | tee "$out/partition-sizes.txt"
bash tests/bench/memory_soak.sh "$bin" "$work/index" "$work/words.txt" "$out" "${3:-2000000}" "${4:-600}" "${5:-60}"
status=$?
rm -rf "$work"
exit $status
