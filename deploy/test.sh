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
# Under ASan and UBSan (clang, its own build in build-fuzz/): every test again, then every
# libFuzzer target for 10 s. WARP_SKIP_SANITIZERS=1 skips both.
if [ "${WARP_SKIP_SANITIZERS:-0}" != 1 ]; then
  ./tests/fuzz/run_sanitized_tests.sh
  ./tests/fuzz/run_fuzzers.sh 10
fi
