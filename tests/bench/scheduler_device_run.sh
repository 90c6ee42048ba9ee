#!/usr/bin/env bash
# On the GPU machine, after tests/gpu/prepare-device-run.sh and with the default corpus gzipped at
# .device-carry/sched/gcide.jsonl.gz: the scheduler's GPU tests (real CPU and GPU processors under
# concurrent load), the cluster test with leaves on --processor auto (the scheduler in the leaf),
# then scheduler_bench on the three loads and its plot. Everything lands in $OUT.
# usage: [WARP_SCHED_TESTS=0] tests/bench/scheduler_device_run.sh [scheduler_bench flags...]
# (WARP_SCHED_TESTS=0: the benchmark alone, e.g. for a second call with other --loads)
set -uo pipefail
out=${OUT:-/tmp/warp-sched-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi -L
status=0
work=$(mktemp -d)
if [ "${WARP_SCHED_TESTS:-1}" != 0 ]; then
.device-bin/gpu_processor_test --gtest_filter='GpuScheduler*:GpuBatching*' > "$out/gpu_scheduler_test.log" 2>&1 || status=1
grep -E "random seed|answers from|OK|FAILED|PASSED" "$out/gpu_scheduler_test.log"
mkdir -p "$work/build/indexer" "$work/build/leaf" "$work/build/broker"
ln -s "$PWD/.device-bin/warp-indexer" "$work/build/indexer/"; ln -s "$PWD/.device-bin/warp-broker" "$work/build/broker/"
ln -s "$PWD/.device-bin/warp-leaf" "$work/build/leaf/"; ln -s "$PWD/.device-bin/warp-search" "$work/build/leaf/"
WARP_LEAF_ARGS="--processor auto --scheduler-calibration-ms 300 --inline-max-postings 0" \
  python3 tests/integration/cluster_test.py "$work/build" .device-bin/cranfield .device-bin/cisi > "$out/cluster_test_auto.log" 2>&1 || status=1
tail -2 "$out/cluster_test_auto.log"
fi
gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
.device-bin/warp-indexer build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
# Stopped after WARP_SCHED_SECONDS (default 540) so what it measured still comes back.
timeout "${WARP_SCHED_SECONDS:-540}" .device-bin/scheduler_bench --index "$work/gcide" --out "$out/scheduler_bench.csv" "$@" > "$out/scheduler_bench.md" 2> "$out/scheduler_bench.log" || status=1
cat "$out/scheduler_bench.md"
python3 tests/bench/plot_scheduler.py "$out/scheduler_bench.csv" "$out/scheduler_delay.png" || status=1
exit $status
