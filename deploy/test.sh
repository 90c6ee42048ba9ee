#!/usr/bin/env bash
# The README's second command: install the packages, build everything, run every test (ctest).
# BUILD_DIR (default build) and CMAKE_ARGS (extra configure flags) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
# Every libFuzzer target for 10 s under ASan and UBSan (clang, its own build in build-fuzz/).
[ "${WARP_SKIP_FUZZ:-0}" = 1 ] || ./tests/fuzz/run_fuzzers.sh 10
