#!/usr/bin/env bash
# On the GPU machine: scheduler_bench held at one arrival rate with `perf record -a` over its
# middle, to see where the scheduler's threads (warp-sched-cpu, warp-sched-gpu) spend their time:
# searching, deciding under the lock, or spinning for it. Prepared as for scheduler_ab.sh (the
# default corpus gzipped at .device-carry/sched/gcide.jsonl.gz, binaries in
# .device-carry/sched/bin.tar.gz, an unstripped benchmark as .device-bin/scheduler_bench_sym if
# there is one); perf from the Debian packages in .device-carry/perf/ (as for
# index_profile_device_run.sh). Reports land in $OUT.
# usage: tests/bench/scheduler_profile_device_run.sh RATE [scheduler_bench flags...]
set -uo pipefail
rate=${1:?usage: scheduler_profile_device_run.sh RATE [flags...]}
shift
out=${OUT:-/tmp/warp-sched-profile}
# shellcheck source=tests/bench/device_perf_env.sh
. "$(dirname "$0")/device_perf_env.sh"
gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
.device-bin/warp-indexer build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
# One rate, ten windows (a window holds 100,000 queries at most: a third of a second at 300k/s),
# the whole run profiled and the benchmark stopped once it has reported that rate; the start-up
# calibration runs on the main thread, which the reports below leave out.
perf record -a -F 1999 -g -o "$work/perf.data" -- "$bench" --index "$work/gcide" --start-rate "$rate" --step 100 \
  --seconds 4 --repeat 10 --calibration-ms 1000 "$@" --out "$out/bench.csv" > "$out/bench.md" 2> "$out/bench.log" &
run=$!
until grep -qE " q/s: " "$out/bench.log" 2>/dev/null || ! kill -0 $run 2>/dev/null; do sleep 0.2; done
pkill -INT -f "$(basename "$bench") --index" 2>/dev/null
wait $run
grep -E "^[a-z0-9]+ [a-z-]+ [0-9]+ q/s" "$out/bench.log" | sed -E 's/ \| machine:.*//' | head -3
perf report -i "$work/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep "%" | head -20 > "$out/comm.txt"
perf report -i "$work/perf.data" --no-children --comm warp-sched-cpu --sort sym --stdio -g none 2>/dev/null | grep "%" | head -40 > "$out/cpu-sym.txt"
perf report -i "$work/perf.data" --no-children --comm warp-sched-gpu --sort sym --stdio -g none 2>/dev/null | grep "%" | head -40 > "$out/gpu-sym.txt"
# Who called the scheduler's lock's spinning and its decisions (callers, folded).
perf report -i "$work/perf.data" --children --comm warp-sched-cpu --sort sym --stdio -g caller,0.5,callee --percent-limit 2 2>/dev/null | head -150 > "$out/cpu-callers.txt"
cat "$out/comm.txt" "$out/cpu-sym.txt" "$out/gpu-sym.txt"
