#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan on everything, build-fuzz/) and runs each one
# from its seed corpus (tests/fuzz/corpus/TARGET, copied: the seeds stay as committed).
#   tests/fuzz/run_fuzzers.sh [SECONDS_EACH]        time-boxed runs (CI: 10 s each, a minute in all)
#   RUNS=1000000 tests/fuzz/run_fuzzers.sh          at least a million executions each (before resolving)
# A crash, a sanitizer report, a hang or a leak fails the script; the input that did it is left in
# build-fuzz/artifacts/ (make it a regression seed in corpus/TARGET/).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10}
build=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWARP_FUZZ=ON \
  -DWARP_BUILD_TESTS=ON -DWARP_BUILD_BENCH=OFF > /dev/null  # the configuration run_sanitized_tests.sh uses
cmake --build "$build" --target fuzzers
mkdir -p "$build/artifacts"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for target in fuzz_http_search fuzz_query_analysis fuzz_leaf_request fuzz_fetch_request fuzz_document_readers \
              fuzz_partition_open fuzz_search_stream fuzz_handshake_client fuzz_generation_manifest \
              fuzz_bulk_documents fuzz_snippet fuzz_query_syntax fuzz_filter fuzz_positions fuzz_tail_reply; do
  corpus="$build/corpus/$target"
  rm -rf "$corpus"; mkdir -p "$corpus"; cp tests/fuzz/corpus/$target/* "$corpus/"
  limit=(-max_total_time="$seconds")
  [ -n "${RUNS:-}" ] && limit=(-runs="$RUNS")
  echo "== $target ${limit[*]}"
  status=0
  "$build/tests/fuzz/$target" "$corpus" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1 > "$build/$target.log" 2>&1 || status=$?
  grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|runtime error|Test unit written" \
    "$build/$target.log" || true
  [ $status -eq 0 ] || { echo "fuzz: $target failed (log $build/$target.log; the input is in $build/artifacts/)"; exit 1; }
done
echo "fuzz: every target ran clean"
