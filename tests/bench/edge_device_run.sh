#!/usr/bin/env bash
# On the GPU machine (16 cores), in one session:
#  1. edge_bench.sh for the binaries in .serve-bench/before (the previous build) and in
#     .serve-bench (this one), one after the other, so the two tables compare;
#  2. with TUNE=FILE, edge_tuning.sh over the configurations in FILE (one per line) for the binaries
#     in .serve-bench, TUNE_SECONDS (5) per load;
#  2b. with AB=N, N rounds of edge_tuning.sh's default configuration for .serve-bench/before and
#     .serve-bench in turn (overhead, CPU and context switches per query, side by side);
#  3. with FUZZ_RUNS=N, the long fuzz runs of the targets in .serve-bench/fuzz/ (too slow for a
#     million executions on the 2-core development machine): JOBS processes per target sharing one
#     corpus, N/JOBS executions each; a crash fails the run and its input lands in $OUT.
# The uncached loads pass http_load --distinct (EDGE_DISTINCT= to load without it): .serve-bench/before
# needs an http_load that has it (this build's), or EDGE_DISTINCT= for both.
# .serve-bench holds stripped warp-leaf, warp-broker and http_load, index/ (the default corpus in
# 2 partitions), words.txt, and fuzz/; it may come packed as .device-carry/serve-bench.tar.gz.
# Runtime libraries from .device-debs when present.
# usage: [EDGE=0] [TUNE=FILE] [AB=ROUNDS] [FUZZ_RUNS=1000000] [JOBS=14] [FUZZ_SECONDS=540] tests/bench/edge_device_run.sh [SECONDS] [IDLE]
set -uo pipefail
out=${OUT:-/tmp/warp-edge-out}
mkdir -p /opt/deps "$out"
if [ -e .device-carry/serve-bench.tar.gz ]; then rm -rf .serve-bench; tar -xzf .device-carry/serve-bench.tar.gz; fi
for f in .device-debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nproc; lscpu | grep "Model name"; date -u
status=0
if [ -x .serve-bench/zmq_rtt ]; then  # the floor: one bare ZeroMQ request/reply on loopback
  .serve-bench/zmq_rtt server tcp://127.0.0.1:5999 & rtt=$!
  .serve-bench/zmq_rtt client tcp://127.0.0.1:5999; kill $rtt
fi
if [ "${EDGE:-1}" = 1 ]; then
  for dir in .serve-bench/before .serve-bench; do
    echo "== $dir"
    bash tests/bench/edge_bench.sh "$dir" .serve-bench/index .serve-bench/words.txt "${1:-10}" "${2:-10000}"
  done
fi
if [ -n "${TUNE:-}" ]; then
  mapfile -t configs < "$TUNE"
  bash tests/bench/edge_tuning.sh .serve-bench .serve-bench/index .serve-bench/words.txt "${TUNE_SECONDS:-5}" "${configs[@]}"
fi
if [ -n "${AB:-}" ]; then
  for round in $(seq "$AB"); do
    for dir in .serve-bench/before .serve-bench; do
      label=$([ "$dir" = .serve-bench ] && echo "this build" || echo before)
      bash tests/bench/edge_tuning.sh "$dir" .serve-bench/index .serve-bench/words.txt "${TUNE_SECONDS:-5}" "$label, round $round;;;" |
        grep -v "^|---\|^| config\|^$"
    done
  done
fi
if [ -n "${FUZZ_RUNS:-}" ]; then
  jobs=${JOBS:-14}
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  for target in $(ls .serve-bench/fuzz); do
    corpus=$(mktemp -d); cp tests/fuzz/corpus/$target/* "$corpus/"
    start=$(date +%s)
    pids=()
    for j in $(seq "$jobs"); do
      .serve-bench/fuzz/$target "$corpus" -runs=$((FUZZ_RUNS / jobs + 1)) -max_total_time=${FUZZ_SECONDS:-540} -seed=$j -timeout=20 -rss_limit_mb=4096 \
        -max_len=65536 -reload=10 -artifact_prefix="$out/$target-$j-" -print_final_stats=1 > "$out/$target-$j.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    units=$(grep -h "stat::number_of_executed_units" "$out/$target"-*.log | awk '{s += $2} END {print s}')
    rss=$(grep -h "stat::peak_rss_mb" "$out/$target"-*.log | awk '{if ($2 > m) m = $2} END {print m}')
    crashes=$(ls "$out" | grep -c "^$target-.*-\(crash\|leak\|timeout\|oom\)-" || true)
    echo "fuzz $target: $jobs processes, $units executions in $(( $(date +%s) - start )) s, corpus $(ls "$corpus" | wc -l) inputs, peak RSS ${rss} MB, $crashes crashing inputs"
    grep -h "ERROR\|SUMMARY\|runtime error" "$out/$target"-*.log | head -5
  done
fi
exit $status
