#!/usr/bin/env bash
# On the GPU machine: GPU tests (GPU against CPU and brute force), then the GPU benchmark.
# Logs and tables go to $OUT. usage: tests/gpu/run-on-device.sh [gpu_bench flags...]
set -uo pipefail
out=${OUT:-/tmp/warp-gpu-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export WARP_SHARED_DATA=$PWD/.device-bin
nvidia-smi -L
for bin in .device-bin/gpu_processor_test .device-bin/gpu_bench .device-bin/warp-indexer .device-bin/warp-search; do
  if ldd "$bin" | grep -q "not found"; then ldd "$bin" | grep "not found"; echo "missing libraries for $bin"; exit 1; fi
done
.device-bin/gpu_processor_test 2>&1 | tee "$out/gpu_test.log" | grep -E "random seed|FAILED|PASSED|SKIPPED|Failure|error" | head -60
test_status=${PIPESTATUS[0]}
echo "gpu_processor_test exit status: $test_status"
# The command-line path: Cranfield indexed, answered by the GPU and the CPU processors; rankings compared.
work=$(mktemp -d)
.device-bin/warp-indexer build --input .device-bin/cranfield/docs.jsonl --out "$work/index" --partitions 2 --quiet
for p in cpu gpu; do
  .device-bin/warp-search --index "$work/index" --queries .device-bin/cranfield/queries.tsv --processor $p -k 100 \
    --threads 4 --run "$work/run.$p" 2>&1 | tail -1
done
echo "warp-search --processor gpu vs cpu: $(diff <(cut -d' ' -f1,3 "$work/run.cpu") <(cut -d' ' -f1,3 "$work/run.gpu") | grep -c '^>') differing ranks of $(wc -l < "$work/run.cpu")"
.device-bin/warp-search --index "$work/index" --queries .device-bin/cranfield/queries.tsv --processor gpu -k 100 \
  --threads 16 --gpu-batch-threshold 5000 --gpu-batch-max 8 --run "$work/run.batched" 2>&1 | tail -1
echo "warp-search --processor gpu --gpu-batch-threshold 5000 vs cpu: $(diff <(cut -d' ' -f1,3 "$work/run.cpu") <(cut -d' ' -f1,3 "$work/run.batched") | grep -c '^>') differing ranks"
.device-bin/gpu_bench "$@" 2>&1 | tee "$out/gpu_bench.md"
exit "$test_status"
