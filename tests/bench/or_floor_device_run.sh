#!/usr/bin/env bash
# On the GPU machine, after tests/gpu/prepare-device-run.sh (binaries in .device-bin, runtime
# packages in .device-debs) and with the default corpus gzipped at $1: what the OR floors save.
# 1. gpu_bench's GOV2-like OR tables at k = 10, 100 and 1,000 (GPU single, lanes, batched; the
#    CPU's BlockMax-WAND beside), with the query's floor and without (--no-or-floor), alternating.
# 2. The CPU's OR a search at k = 100 and 1,000 on the GOV2-like preset and the default corpus,
#    one thread and fourteen, with the floors and without (scheduler_bench --term-tops 0),
#    alternating.
# Everything lands in $OUT. usage: [ROUNDS=2] [PARTS=gpu,cpu] tests/bench/or_floor_device_run.sh GCIDE.jsonl.gz
set -uo pipefail
corpus=${1:?usage: or_floor_device_run.sh GCIDE.jsonl.gz}
out=${OUT:-/tmp/warp-floor-out}
rounds=${ROUNDS:-2}
parts=${PARTS:-gpu,cpu}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi -L
status=0
if [[ ,$parts, == *,gpu,* ]]; then
  for round in $(seq "$rounds"); do
    for floor in on off; do
      flag=()
      [ $floor = off ] && flag=(--no-or-floor)
      .device-bin/gpu_bench --max-log2 0 --docs 0 --no-intersection --modes or --ks 10,100,1000 --gov2-queries 500 \
        --passes 2 "${flag[@]}" > "$out/gpu_bench.$floor.$round.md" 2> "$out/gpu_bench.$floor.$round.log" || status=1
      echo "## gpu_bench, floor $floor, round $round"
      grep -E "^\| (or|OR)" "$out/gpu_bench.$floor.$round.md"
    done
  done
fi
if [[ ,$parts, == *,cpu,* ]]; then
  work=$(mktemp -d)
  gunzip -c "$corpus" > "$work/gcide.jsonl"
  .device-bin/warp-indexer build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
  for round in $(seq "$rounds"); do
    for k in 100 1000; do
      for tops in 1 0; do
        echo "## CPU, k $k, floors $([ $tops = 1 ] && echo on || echo off), round $round"
        .device-bin/scheduler_bench --index "$work/gcide" --loads gov2,default --policies cpu --k $k --term-tops $tops \
          --cpu-cost-seconds 2 --cpu-cost-threads 1,14 2>&1 | grep -E "thread\(s\)" || status=1
      done
    done
  done
fi
exit $status
