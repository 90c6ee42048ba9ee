#!/usr/bin/env bash
# On the GPU machine: the parsers' analysis on the GPU (`warp-indexer build --gpu-analysis`).
# Binaries in .device-bin/ (warp-indexer, gpu_indexer_test, synthetic_text, with the Cranfield and
# CISI data beside them: tests/gpu/prepare-device-run.sh or a tarball of them), runtime packages in
# .device-debs/, optionally the default corpus at $GCIDE (gzipped JSONL). Runs the GPU indexer and
# analysis tests, then builds of 2 GiB of synthetic text (and of the default corpus repeated eight
# times, when given) with and without --gpu-analysis, alternating (tests/bench/index_ab.sh: every
# build's digest must equal the first one's), and one build's summary line with the GPU's counts.
# TMPDIR=/dev/shm puts the corpora, the builds' run files and partitions on tmpfs (no disk writes).
# usage: tests/bench/gpu_analysis_device_run.sh [THREADS,...(16)] [ROUNDS(3)] [SYNTHETIC_MB(2048)]
set -uo pipefail
threads=${1:-16} rounds=${2:-3} synthetic_mb=${3:-2048}
out=${OUT:-/tmp/warp-gpu-analysis-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export WARP_SHARED_DATA=$PWD/.device-bin
nproc; nvidia-smi -L
status=0
.device-bin/gpu_indexer_test 2>&1 | tee "$out/gpu_indexer_test.log" | grep -E "random seed|FAILED|PASSED|SKIPPED|Failure|shared cache|GPU indexers|error" | head -40
[ "${PIPESTATUS[0]}" = 0 ] || status=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.device-bin/synthetic_text --out "$work/synthetic.jsonl" --megabytes "$synthetic_mb" 2>&1 | tail -1
indexer=.device-bin/warp-indexer
last=${threads##*,}  # the summary lines' thread count
bash tests/bench/index_ab.sh "$work/synthetic.jsonl" "$threads" "$rounds" cpu=$indexer "gpu=$indexer --gpu-analysis" | tee "$out/synthetic.md" || status=1
$indexer build --input "$work/synthetic.jsonl" --out "$work/one" --partitions 4 --threads "$last" --gpu-analysis --quiet 2>&1 | tail -1 | tee "$out/summary.txt"
rm -rf "$work/one"
if [ -n "${GCIDE:-}" ] && [ -f "$GCIDE" ]; then
  gunzip -c "$GCIDE" > "$work/gcide.jsonl"
  for k in 1 2 3 4 5 6 7 8; do sed "s/^{\"id\": \"/{\"id\": \"r$k-/" "$work/gcide.jsonl"; done > "$work/gcide-x8.jsonl"
  rm "$work/gcide.jsonl"
  bash tests/bench/index_ab.sh "$work/gcide-x8.jsonl" "$threads" "$rounds" cpu=$indexer "gpu=$indexer --gpu-analysis" | tee "$out/gcide.md" || status=1
  $indexer build --input "$work/gcide-x8.jsonl" --out "$work/one" --partitions 4 --threads "$last" --gpu-analysis --quiet 2>&1 | tail -1 | tee -a "$out/summary.txt"
fi
echo "gpu analysis run status: $status"
exit $status
