#!/usr/bin/env bash
# On the GPU machine: GPU tests (GPU against CPU and brute force), warp-search's GPU paths against
# its CPU path on Cranfield and CISI (runs identical byte for byte: one ranking), the cluster test
# with GPU leaves batching, then the GPU benchmark (skipped with BENCH=0).
# Logs and tables go to $OUT. usage: tests/gpu/run-on-device.sh [gpu_bench flags...]
set -uo pipefail
out=${OUT:-/tmp/warp-gpu-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export WARP_SHARED_DATA=$PWD/.device-bin
nvidia-smi -L
for bin in .device-bin/gpu_processor_test .device-bin/gpu_bench .device-bin/warp-indexer .device-bin/warp-search \
           .device-bin/warp-leaf .device-bin/warp-broker; do
  if ldd "$bin" | grep -q "not found"; then ldd "$bin" | grep "not found"; echo "missing libraries for $bin"; exit 1; fi
done
.device-bin/gpu_processor_test 2>&1 | tee "$out/gpu_test.log" | grep -E "random seed|FAILED|PASSED|SKIPPED|Failure|error" | head -60
test_status=${PIPESTATUS[0]}
echo "gpu_processor_test exit status: $test_status"
# The command-line path: each collection indexed, answered by the CPU and by the GPU (single-query,
# then batched); the runs must be identical, documents and scores. Queries of 65, 200 and 1,000
# words (once fatal to a batching process) are appended to CISI's.
work=$(mktemp -d)
tr -c 'a-z\n' ' ' < .device-bin/cisi/docs.jsonl | tr ' ' '\n' | awk 'length($0) > 3' | sort -u > "$work/words.txt"
cp .device-bin/cisi/queries.tsv "$work/cisi-queries.tsv"
for n in 65 200 1000; do printf 'long%d\t%s\n' $n "$(shuf -n $n --random-source="$work/words.txt" "$work/words.txt" | tr '\n' ' ')"; done >> "$work/cisi-queries.tsv"
for collection in cranfield cisi; do
  queries=.device-bin/$collection/queries.tsv
  [ $collection = cisi ] && queries=$work/cisi-queries.tsv
  .device-bin/warp-indexer build --input .device-bin/$collection/docs.jsonl --out "$work/$collection" --partitions 2 --quiet
  paths=("cpu" "gpu" "gpu --gpu-batch-threshold 200000 --gpu-batch-max 8")
  # With two GPUs: each partition replicated on both, batches spread over them.
  [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && paths+=("gpu --gpu-batch-threshold 200000 --gpu-batch-max 8 --gpu-devices 0,1 --gpu-replicas 2")
  for mode in and or andor; do
    for path in "${paths[@]}"; do
      name=$(echo "$path" | tr -dc 'a-z0-9')
      .device-bin/warp-search --index "$work/$collection" --queries "$queries" --mode $mode --processor $path -k 100 \
        --threads 8 --run "$work/run.$collection.$mode.$name" 2> "$work/search.log" || { tail -3 "$work/search.log"; test_status=1; }
      if ! cmp -s "$work/run.$collection.$mode.cpu" "$work/run.$collection.$mode.$name"; then
        echo "DIFFER: $collection $mode --processor $path: $(diff "$work/run.$collection.$mode.cpu" "$work/run.$collection.$mode.$name" | grep -c '^>') lines"
        test_status=1
      fi
    done
    echo "$collection $mode: ${#paths[@]} runs (cpu, gpu, gpu batched$([ ${#paths[@]} -gt 3 ] && echo ', gpu batched on 2 GPUs')) identical ($(wc -l < "$work/run.$collection.$mode.cpu") lines)"
  done
done
# The cluster test with every leaf on the GPU processor, batching on.
mkdir -p "$work/build/indexer" "$work/build/leaf" "$work/build/broker"
ln -s "$PWD/.device-bin/warp-indexer" "$work/build/indexer/"; ln -s "$PWD/.device-bin/warp-broker" "$work/build/broker/"
ln -s "$PWD/.device-bin/warp-leaf" "$work/build/leaf/"; ln -s "$PWD/.device-bin/warp-search" "$work/build/leaf/"
WARP_LEAF_ARGS="--processor gpu --gpu-batch-threshold 200000 --gpu-batch-max 8 --gpu-lanes 1" \
  python3 tests/integration/cluster_test.py "$work/build" .device-bin/cranfield .device-bin/cisi > "$out/cluster_test.log" 2>&1
cluster_status=$?
tail -3 "$out/cluster_test.log"
echo "cluster_test with GPU leaves batching: exit $cluster_status"
[ $cluster_status -eq 0 ] || test_status=1
if [ "${BENCH:-1}" != 0 ]; then .device-bin/gpu_bench "$@" 2>&1 | tee "$out/gpu_bench.md"; fi
exit "$test_status"
