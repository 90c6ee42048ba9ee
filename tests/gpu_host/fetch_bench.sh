#!/usr/bin/env bash
# On the GPU host, with a bundle made by prepare.sh: fetch_bench on the default corpus twice over
# (ids made distinct): a build with stored documents against --no-store, and a page's hit (stored
# read, snippet) against Xapian's get_data and MSet::snippet. The table lands in OUT/fetch_bench.md.
# usage: tests/gpu_host/fetch_bench.sh BUNDLE OUT
set -uo pipefail
bundle=$(realpath "${1:?usage: fetch_bench.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: fetch_bench.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
for k in 1 2; do sed "s/^{\"id\": \"/{\"id\": \"r$k-/" "$work/gcide.jsonl"; done > "$work/gcide-x2.jsonl"
mkdir -p "$out"
"$bin/fetch_bench" --input "$work/gcide-x2.jsonl" --partitions 4 --runs 3 --queries 1000 --work "$work/bench" \
  | tee "$out/fetch_bench.md"
status=${PIPESTATUS[0]}
rm -rf "$work"
exit "$status"
