#!/usr/bin/env bash
# On the GPU machine, after tests/gpu/prepare-device-run.sh: the GPU indexer tests (inverter against
# a reference, builds with GPU indexers identical to the CPU build), then builds of the default
# corpus (.device-carry/sched/gcide.jsonl.gz, when carried) with and without GPU indexers, their
# partitions compared with `warp-indexer digest`. Logs to $OUT.
set -uo pipefail
out=${OUT:-/tmp/warp-gpu-indexer-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export WARP_SHARED_DATA=$PWD/.device-bin
nvidia-smi -L
status=0
.device-bin/gpu_indexer_test 2>&1 | tee "$out/gpu_indexer_test.log" | grep -E "random seed|FAILED|PASSED|SKIPPED|Failure|GPU indexers|error" | head -40
[ "${PIPESTATUS[0]}" = 0 ] || status=1
if [ -f .device-carry/sched/gcide.jsonl.gz ]; then
  work=$(mktemp -d)
  gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
  for k in 1 2 3 4; do sed "s/^{\"id\": \"/{\"id\": \"r$k-/" "$work/gcide.jsonl"; done > "$work/gcide-x4.jsonl"
  digests=0
  for variant in "cpu:--threads 16" "gpu1:--threads 16 --gpu-indexers 1" "gpu2:--threads 16 --gpu-indexers 2 --indexers 2" \
                 "gpu-collide:--threads 8 --gpu-indexers 1 --gpu-hash-bits 16 --memory-budget 256"; do
    name=${variant%%:*}
    .device-bin/warp-indexer build --input "$work/gcide-x4.jsonl" --out "$work/$name" --partitions 4 ${variant#*:} --quiet 2>&1 | tail -1 | sed "s/^/$name: /"
    .device-bin/warp-indexer digest "$work/$name" > "$work/$name.digest"
    if [ "$name" != cpu ] && ! cmp -s "$work/cpu.digest" "$work/$name.digest"; then echo "DIFFER: $name"; digests=1; status=1; fi
  done
  echo "default corpus x4: every GPU build's digest equals the CPU build's: $([ $digests = 0 ] && echo yes || echo NO)"
fi
echo "gpu indexer run status: $status"
exit $status
