#!/usr/bin/env bash
# On the 16-core GPU machine, after tests/gpu/prepare-device-run.sh and with the default corpus
# gzipped at .device-carry/sched/gcide.jsonl.gz: warp-indexer build at 1, 2, 4, 8 and 16 threads on
# the default corpus repeated eight times (ids made distinct) and on 2 GiB of synthetic text, Xapian
# single-threaded on the default corpus, the 2 GiB corpus once more under a 512 MiB budget (a
# corpus 4× the budget), and the scaling plot. Everything lands in $OUT.
# The whole run is longer than one device call allows (10 minutes), so it comes in two parts:
#   --part cpu   Xapian and the CPU-only builds at every thread count (index_bench.csv)
#   --part gpu   the builds with the parsers' analysis on the GPU (--gpu-analysis at 8 and 16
#                threads) and with two GPU indexers (Wei & JaJa's, at 16), the bounded build; rows
#                appended to tests/bench/plots/index_bench.csv (part cpu's CSV, copied there between
#                the calls), then the plot from all of it
# (--part all, both in one call, takes about three minutes on the H100 host.)
# usage: tests/bench/index_device_run.sh [--part cpu|gpu|all] [--threads 1,2,4,8,16] [--synthetic-mb 2048]
set -uo pipefail
threads=1,2,4,8,16
gpu_threads=8,16
synthetic_mb=2048
part=all
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --synthetic-mb) synthetic_mb=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
out=${OUT:-/tmp/warp-index-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nproc; lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|L2|L3)"; free -g | head -2; nvidia-smi -L
work=$(mktemp -d)
gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
for k in 1 2 3 4 5 6 7 8; do sed "s/^{\"id\": \"/{\"id\": \"r$k-/" "$work/gcide.jsonl"; done > "$work/gcide-x8.jsonl"
.device-bin/synthetic_text --out "$work/synthetic-2g.jsonl" --megabytes "$synthetic_mb" 2>&1 | tail -1
status=0
bench() {  # index_bench over both corpora with the given extra flags; rows to $1
  local csv=$1; shift
  .device-bin/index_bench --indexer .device-bin/warp-indexer --work "$work/bench" --xapian-max-mb 0 \
    --corpus "$work/gcide-x8.jsonl" --corpus "$work/synthetic-2g.jsonl" --csv "$csv" "$@" 2>> "$out/index_bench.log" || status=1
}
if [ "$part" != gpu ]; then
  .device-bin/index_bench --indexer .device-bin/warp-indexer --work "$work/bench" --threads 1 --xapian-max-mb 100 \
    --corpus "$work/gcide.jsonl" --csv "$out/xapian.csv" > "$out/xapian.md" 2> "$out/xapian.log" || status=1
  bench "$out/index_bench.csv" --threads "$threads" | tee "$out/index_bench.md"
  cat "$out/xapian.md"
  tail -1 "$out/xapian.csv" >> "$out/index_bench.csv"
fi
if [ "$part" != cpu ]; then
  [ "$part" = gpu ] && cp tests/bench/plots/index_bench.csv "$out/index_bench.csv"
  bench "$out/gpu.csv" --threads "$gpu_threads" --gpu-analysis | tee "$out/index_bench_gpu.md"
  tail -n +2 "$out/gpu.csv" >> "$out/index_bench.csv"
  bench "$out/gpu-indexers.csv" --threads 16 --gpu-indexers 2 | tee -a "$out/index_bench_gpu.md"
  tail -n +2 "$out/gpu-indexers.csv" >> "$out/index_bench.csv"
  # A corpus four times the budget, at 16 threads: peak RSS against the budget.
  .device-bin/warp-indexer build --input "$work/synthetic-2g.jsonl" --out "$work/bounded" --partitions 4 --threads 16 \
    --memory-budget 512 --quiet 2>&1 | tee "$out/bounded.log" | tail -1
  python3 tests/bench/plot_index_scaling.py "$out/index_bench.csv" "$out/index_scaling.png" || status=1
fi
grep "^wrote" "$out/index_bench.log" | sed 's/.*partition(s), //' > "$out/summaries.txt"
rm -rf "$work"
exit $status
