#!/usr/bin/env bash
# index_ab: warp-indexer builds side by side on one machine, alternating, so that the spread between
# machine starts does not enter the comparison. Each LABEL=BINARY builds CORPUS at every thread
# count ROUNDS times (in the order binary, binary, ... within a round); prints real, user and sys
# seconds, the build's phases and runs, and checks every build's digest against the first one's.
# A pair may carry build flags after the binary, in one argument: 'gpu=bin/warp-indexer --gpu-analysis'.
# usage: tests/bench/index_ab.sh CORPUS THREADS(1,16) ROUNDS LABEL=BINARY[ FLAGS]...
set -uo pipefail
corpus=$1 threads=$2 rounds=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
first_digest=""
# Children's CPU so far: where this script is the last command of a `bash -c`, bash execs it in its
# own process, whose counters already hold what ran before (a first row had read 183 and 351 user s).
read -r prev_cu prev_cs < <(awk '{print $16, $17}' /proc/$$/stat)
echo "| binary | threads | round | real s | user s | sys s | peak RSS MiB | runs | phases |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for round in $(seq "$rounds"); do
  for t in ${threads//,/ }; do
    for pair in "$@"; do
      label=${pair%%=*}
      read -ra cmd <<< "${pair#*=}"
      bin=${cmd[0]}
      rm -rf "$work/index"
      start=$(date +%s.%N)
      "$bin" build "${cmd[@]:1}" --input "$corpus" --out "$work/index" --partitions 4 --threads "$t" --quiet > "$work/log" 2>&1 || { status=1; tail -3 "$work/log"; continue; }
      end=$(date +%s.%N)
      read -r cu cs < <(awk '{print $16, $17}' /proc/$$/stat)
      summary=$(grep "^wrote" "$work/log" | tail -1)
      runs=$(sed -n 's/.* \([0-9]*\) runs,.*/\1/p' <<< "$summary")
      phases=$(sed -n 's/.*(\(parse+index[^)]*\)).*/\1/p' <<< "$summary")
      rss=$(sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' <<< "$summary")
      hz=$(getconf CLK_TCK)
      awk -v l="$label" -v t="$t" -v r="$round" -v s="$start" -v e="$end" -v u="$((cu - ${prev_cu:-0}))" -v y="$((cs - ${prev_cs:-0}))" \
        -v hz="$hz" -v rss="$rss" -v runs="$runs" -v p="$phases" \
        'BEGIN { printf "| %s | %s | %s | %.2f | %.1f | %.1f | %s | %s | %s |\n", l, t, r, e - s, u / hz, y / hz, rss, runs, p }'
      digest=$("$bin" digest "$work/index" | md5sum | cut -c1-12)
      read -r prev_cu prev_cs < <(awk '{print $16, $17}' /proc/$$/stat)  # the digest's CPU left out
      [ -z "$first_digest" ] && first_digest=$digest
      [ "$digest" != "$first_digest" ] && { echo "digest of $label at $t threads differs: $digest against $first_digest"; status=1; }
    done
  done
done
exit $status
