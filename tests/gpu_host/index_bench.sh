#!/usr/bin/env bash
# On the 16-core GPU host, with a bundle made by prepare.sh: warp-indexer build at 1, 2, 4, 8 and 16
# threads on the default corpus repeated eight times (ids made distinct) and on 2 GiB of synthetic
# text; Xapian single-threaded on the default corpus; with --part gpu or all, --gpu-analysis at 8 and
# 16 threads and two GPU indexers at 16, and the 2 GiB corpus under a 512 MiB budget; then the
# scaling plot. Tables, CSV and plot land in OUT. With BEFORE=BUNDLE2 (and --part cpu), each
# thread count is built by that build's warp-indexer first, then this one's (an A/B on one start).
# usage: tests/gpu_host/index_bench.sh BUNDLE OUT [--part cpu|gpu|all] [--threads 1,2,4,8,16] [--synthetic-mb 2048]
set -uo pipefail
bundle=$(realpath "${1:?usage: index_bench.sh BUNDLE OUT [flags]}") out=$(realpath -m "${2:?usage: index_bench.sh BUNDLE OUT [flags]}")
shift 2
threads=1,2,4,8,16 gpu_threads=8,16 synthetic_mb=2048 part=all
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --synthetic-mb) synthetic_mb=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
for k in 1 2 3 4 5 6 7 8; do sed "s/^{\"id\": \"/{\"id\": \"r$k-/" "$work/gcide.jsonl"; done > "$work/gcide-x8.jsonl"
"$bin/synthetic_text" --out "$work/synthetic-2g.jsonl" --megabytes "$synthetic_mb" 2>&1 | tail -1
status=0
bench() {  # index_bench over both corpora: $1 the warp-indexer, $2 the CSV, then extra flags
  local indexer=$1 csv=$2; shift 2
  "$bin/index_bench" --indexer "$indexer" --work "$work/bench" --xapian-max-mb 0 \
    --corpus "$work/gcide-x8.jsonl" --corpus "$work/synthetic-2g.jsonl" --csv "$csv" "$@" 2>> "$out/index_bench.log" || status=1
}
if [ "$part" != gpu ]; then
  "$bin/index_bench" --indexer "$bin/warp-indexer" --work "$work/bench" --threads 1 --xapian-max-mb 100 \
    --corpus "$work/gcide.jsonl" --csv "$out/xapian.csv" > "$out/xapian.md" 2> "$out/xapian.log" || status=1
  if [ -n "${BEFORE:-}" ]; then
    for t in ${threads//,/ }; do
      bench "$(realpath "$BEFORE")/bin/warp-indexer" "$out/index_bench_before.csv" --threads "$t" | tee -a "$out/index_bench_before.md"
      bench "$bin/warp-indexer" "$out/index_bench.csv" --threads "$t" | tee -a "$out/index_bench.md"
    done
  else
    bench "$bin/warp-indexer" "$out/index_bench.csv" --threads "$threads" | tee "$out/index_bench.md"
  fi
  cat "$out/xapian.md"
  tail -1 "$out/xapian.csv" >> "$out/index_bench.csv"
fi
if [ "$part" != cpu ]; then
  bench "$bin/warp-indexer" "$out/gpu.csv" --threads "$gpu_threads" --gpu-analysis | tee "$out/index_bench_gpu.md"
  tail -n +2 "$out/gpu.csv" >> "$out/index_bench.csv"
  bench "$bin/warp-indexer" "$out/gpu-indexers.csv" --threads 16 --gpu-indexers 2 | tee -a "$out/index_bench_gpu.md"
  tail -n +2 "$out/gpu-indexers.csv" >> "$out/index_bench.csv"
  # A corpus four times the budget, at 16 threads: peak RSS against the budget.
  "$bin/warp-indexer" build --input "$work/synthetic-2g.jsonl" --out "$work/bounded" --partitions 4 --threads 16 \
    --memory-budget 512 --quiet 2>&1 | tee "$out/bounded.log" | tail -1
fi
python3 tests/bench/plot_index_scaling.py "$out/index_bench.csv" "$out/index_scaling.png" || status=1
rm -rf "$work"
exit $status
