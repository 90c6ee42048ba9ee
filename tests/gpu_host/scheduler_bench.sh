#!/usr/bin/env bash
# On a GPU host, with a bundle made by prepare.sh: scheduler_bench (Ding et al. Fig. 7: Poisson
# arrivals at rising rates; the CPU alone, the GPU alone, the better one per query and the scheduler,
# mean and p99 delay) over the default corpus in 2 partitions, with the GOV2-like preset made by
# the benchmark itself, then its plot. Extra arguments go to scheduler_bench (e.g. --loads mixed
# --repeat 3 --refine 2). Tables, CSV, log and plot land in OUT.
# usage: [SECONDS_LIMIT=540] tests/gpu_host/scheduler_bench.sh BUNDLE OUT [scheduler_bench flags...]
set -uo pipefail
bundle=$(realpath "${1:?usage: scheduler_bench.sh BUNDLE OUT [flags]}") out=$(realpath -m "${2:?usage: scheduler_bench.sh BUNDLE OUT [flags]}")
shift 2
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gunzip -c "$bundle/data/gcide.jsonl.gz" > "$work/gcide.jsonl"
"$bin/warp-indexer" build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
status=0
# Stopped after SECONDS_LIMIT so that what it measured still comes back.
timeout "${SECONDS_LIMIT:-540}" "$bin/scheduler_bench" --index "$work/gcide" --out "$out/scheduler_bench.csv" "$@" \
  > "$out/scheduler_bench.md" 2> "$out/scheduler_bench.log" || status=1
cat "$out/scheduler_bench.md"
python3 tests/bench/plot_scheduler.py "$out/scheduler_bench.csv" "$out/scheduler_delay.png" || status=1
rm -rf "$work"
exit $status
