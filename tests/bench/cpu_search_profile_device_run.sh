#!/usr/bin/env bash
# On the GPU machine: where the CPU processor's searches spend their time, with no scheduler:
# `scheduler_bench --policies cpu --cpu-cost-seconds` (each load's searches on N threads at once)
# under `perf record`, for each thread count. Prepared as scheduler_profile_device_run.sh is
# (binaries in .device-carry/sched/bin.tar.gz, an unstripped benchmark as
# .device-bin/scheduler_bench_sym if there is one, perf from .device-carry/perf/). Reports in $OUT.
# usage: tests/bench/cpu_search_profile_device_run.sh LOAD THREADS,... [SECONDS]
set -uo pipefail
load=${1:?usage: cpu_search_profile_device_run.sh LOAD THREADS,... [SECONDS]} counts=${2:?threads} seconds=${3:-6}
out=${OUT:-/tmp/warp-cpu-profile}
mkdir -p "$out" /opt/perf /opt/deps
[ -f .device-carry/sched/bin.tar.gz ] && tar -xzf .device-carry/sched/bin.tar.gz
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
for f in .device-carry/perf/*.deb; do dpkg -x "$f" /opt/perf; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
perf_libs=/opt/perf/usr/lib/x86_64-linux-gnu:/opt/perf/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
perf() { LD_LIBRARY_PATH=$perf_libs /opt/perf/usr/bin/perf "$@"; }
bench=.device-bin/scheduler_bench
[ -x .device-bin/scheduler_bench_sym ] && bench=.device-bin/scheduler_bench_sym
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
index=()
if [ "$load" != gov2 ]; then
  gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
  .device-bin/warp-indexer build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
  index=(--index "$work/gcide")
fi
lscpu | grep -E "Model name|L3|^CPU\(s\)" | tee "$out/lscpu.txt"
"$bench" "${index[@]}" --policies cpu --loads "$load" --cpu-cost-seconds "$seconds" --cpu-cost-threads "$counts" 2>&1 | grep "a search" | tee "$out/cost.txt"
IFS=, read -r -a list <<< "$counts"
for n in "${list[@]}"; do
  perf record -F 999 -g -o "$work/perf-$n.data" -- "$bench" "${index[@]}" --policies cpu --loads "$load" \
    --cpu-cost-seconds "$seconds" --cpu-cost-threads "$n" > /dev/null 2>&1
  perf report -i "$work/perf-$n.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep "%" | head -30 > "$out/sym-$n.txt"
  # The lines of the hottest functions, for the loads that miss.
  for f in score_postings_avx2 tiled_or_query advance_block; do
    perf annotate -i "$work/perf-$n.data" --stdio -s "$(perf report -i "$work/perf-$n.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep "$f" | head -1 | sed 's/.*\] //; s/ *$//')" 2>/dev/null \
      | grep -E "^\s+[0-9]+\.[0-9]+ :" | sort -rn | head -12 > "$out/annotate-$n-$f.txt"
  done
  echo "== $n threads"; head -16 "$out/sym-$n.txt"
done
