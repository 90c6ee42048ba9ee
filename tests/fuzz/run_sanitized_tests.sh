#!/usr/bin/env bash
# Every test (unit and integration; the GPU tests need CUDA and are not built) against a clang
# build with AddressSanitizer and UndefinedBehaviorSanitizer on every library and binary
# (build-fuzz/, shared with the fuzzers). A sanitizer report aborts the process, so the test fails.
# Leak detection is off: ZeroMQ's and prometheus-cpp's process-wide objects are never freed.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWARP_FUZZ=ON \
  -DWARP_BUILD_TESTS=ON -DWARP_BUILD_BENCH=OFF > /dev/null
cmake --build "$build"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 600
