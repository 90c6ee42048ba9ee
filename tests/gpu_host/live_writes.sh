#!/usr/bin/env bash
# On the 16-core host, with a bundle made by prepare.sh: the writes benchmark
# (tests/bench/live_writes_bench.sh) over the default corpus. Into OUT: live-writes.md, .json, .png.
# usage: tests/gpu_host/live_writes.sh BUNDLE OUT [SECONDS] [FOLD_MS]
set -uo pipefail
bundle=$(realpath "${1:?usage: live_writes.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: live_writes.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
mkdir -p "$out"
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
tr -c 'a-z\n' ' ' < "$work/gcide.jsonl" | tr ' ' '\n' | awk 'length($0) > 2' | sort -u > "$work/words.txt"
bash tests/bench/live_writes_bench.sh "$bin" "$work/gcide.jsonl" "$work/words.txt" "$out" "${3:-20}" "${4:-10000}"
status=$?
rm -rf "$work"
exit $status
