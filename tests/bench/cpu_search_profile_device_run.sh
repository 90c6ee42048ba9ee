#!/usr/bin/env bash
# On the GPU machine: where the CPU processor's searches spend their time, with no scheduler:
# `scheduler_bench --policies cpu --cpu-cost-seconds` (each load's searches on N threads at once)
# under `perf record`, for each thread count. What it needs carried: device_perf_env.sh (and, for
# the default corpus, .device-carry/sched/gcide.jsonl.gz). Reports in $OUT.
# usage: tests/bench/cpu_search_profile_device_run.sh LOAD THREADS,... [SECONDS]
set -uo pipefail
load=${1:?usage: cpu_search_profile_device_run.sh LOAD THREADS,... [SECONDS]} counts=${2:?threads} seconds=${3:-6}
out=${OUT:-/tmp/warp-cpu-profile}
# shellcheck source=tests/bench/device_perf_env.sh
. "$(dirname "$0")/device_perf_env.sh"
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
