#!/usr/bin/env bash
# On a build machine (no GPU needed): builds the GPU tests, benchmarks and services for sm_90 and
# fills BUNDLE with what a GPU host needs to run them, built here and carried there:
#   BUNDLE/bin/   the stripped binaries
#   BUNDLE/data/  Cranfield and CISI (tests/data), and the default corpus gzipped (gcide.jsonl.gz)
#   BUNDLE/debs/  the runtime packages the GPU host lacks (runtime_debs.sh)
# Then, on the GPU host, from a copy of this tree: tests/gpu_host/gpu_tests.sh BUNDLE OUT, and the
# benchmark scripts beside it, each taking BUNDLE and an output folder.
# usage: tests/gpu_host/prepare.sh BUNDLE   (BUILD_DIR, default build-gpu; BUILD_JOBS)
set -euo pipefail
bundle=$(realpath -m "${1:?usage: prepare.sh BUNDLE}")
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
targets=(gpu_processor_test gpu_constraints_test gpu_indexer_test live_writes_test gpu_bench scheduler_bench index_bench xapian_writes fetch_bench phrase_bench filter_bench synthetic_text http_load
         warp-indexer warp-search warp-leaf warp-broker)
cmake --build "$build" ${BUILD_JOBS:+-j $BUILD_JOBS} --target "${targets[@]}"
rm -rf "$bundle/bin" && mkdir -p "$bundle/bin" "$bundle/data"
for target in "${targets[@]}"; do
  strip -o "$bundle/bin/$target" "$(find "$build" -type f -name "$target" -perm -u+x | head -1)"
done
cp -r tests/data/cranfield tests/data/cisi "$bundle/data/"
if [ ! -f "$bundle/data/gcide.jsonl.gz" ]; then
  [ -f data/corpus/gcide.jsonl ] || { mkdir -p data/corpus && python3 deploy/corpus/gcide_to_jsonl.py data/corpus/gcide.jsonl; }
  gzip -c data/corpus/gcide.jsonl > "$bundle/data/gcide.jsonl.gz"
fi
tests/gpu_host/runtime_debs.sh "$bundle/debs"
du -sh "$bundle"/*
