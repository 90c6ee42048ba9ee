#!/usr/bin/env bash
# Here (no GPU): build the GPU tests, benchmark and services for sm_90, strip them into .device-bin/
# with the Cranfield and CISI data, and fetch the runtime packages the GPU machine lacks into .device-debs/
# (../shared/GPU.md). Then one device call runs tests/gpu/run-on-device.sh with carry
# [".device-bin", ".device-debs"].
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
cmake --build "$build" ${BUILD_JOBS:+-j $BUILD_JOBS} --target gpu_processor_test gpu_indexer_test gpu_bench scheduler_bench index_bench synthetic_text warp-indexer warp-search warp-leaf warp-broker
rm -rf .device-bin && mkdir -p .device-bin
for bin in "$build/tests/gpu_processor_test" "$build/tests/gpu_indexer_test" "$build/tests/bench/gpu_bench" "$build/tests/bench/scheduler_bench" \
           "$build/tests/bench/index_bench" "$build/tests/bench/synthetic_text" "$build/indexer/warp-indexer" \
           "$build/leaf/warp-search" "$build/leaf/warp-leaf" "$build/broker/warp-broker"; do
  strip -o ".device-bin/$(basename "$bin")" "$bin"
done
cp -r ../shared/data/cranfield ../shared/data/cisi .device-bin/
EXTRA_DEBS="libgflags2.2 libc-ares2 libxapian30 libsimdjson14 libtcmalloc-minimal4" bash ../shared/tools/device-debs.sh .device-debs
du -sh .device-bin .device-debs
