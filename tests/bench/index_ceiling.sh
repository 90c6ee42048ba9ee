#!/usr/bin/env bash
# index_ceiling: how far the machine itself lets a build scale from 1 to N threads (a ceiling to quote the build's scaling against).
# The corpus is cut into N pieces at line boundaries; then, alternating ROUNDS times:
#   whole/1    warp-indexer build of the whole corpus, 1 thread
#   whole/N    the same, N threads (what the issue's ratio measures)
#   piece/1    one piece alone, 1 thread (piece 0, then 1, ...: a different one each round)
#   pieces×N   N one-thread builds, one per piece, started together: no shared memory, no shared
#              runs or locks, no merge across threads; the wall time until the last one ends
#   copies×N   (COPIES=1) N one-thread builds of the whole corpus started together: N times
#              whole/1's work, nothing shared between them
# and prints the ratios: whole/1 ÷ whole/N (the build's scaling), N × piece/1 ÷ pieces×N and
# N × whole/1 ÷ copies×N (how much slower one thread's work runs while N run beside it: the
# machine's ceiling for this workload, whatever the code shares) and whole/1 ÷ pieces×N (the same
# work sharded into N independent builds). Also `sha256sum` of a cached piece, one alone and N at
# once (a compute-bound peer). whole/N's digest is checked against whole/1's. Builds, their runs
# and outputs go under TMPDIR (e.g. /dev/shm, so the disk stays out of it).
# A second table gives the CPU seconds (user + sys) of whole/1, whole/N and copies×N, and how much
# more CPU than whole/1's each of the latter spent on the same work: whole/N ÷ whole/1 is the
# build's extra CPU with the machine's, copies×N ÷ (N × whole/1) the machine's alone (its cores
# slower when all are busy: frequency, caches, memory).
# usage: [COPIES=1] tests/bench/index_ceiling.sh CORPUS BINARY [N=16] [ROUNDS=2]
set -uo pipefail
corpus=$1 bin=$2 n=${3:-16} rounds=${4:-2}
work=$(mktemp -d)  # under TMPDIR
trap 'rm -rf "$work"' EXIT
status=0
split -n "l/$n" -d -a 3 "$corpus" "$work/piece-"
pieces=("$work"/piece-*)
now() { date +%s.%N; }
# CPU seconds (user + sys) of this shell's finished children so far, and since an earlier reading.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($16 + $17) / hz }' /proc/$$/stat; }
cpu_since() { awk -v a="$(cpu)" -v b="$1" 'BEGIN { print a - b }'; }
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { print e - s }'; }
build() {  # INPUT OUT THREADS: quiet build; on failure its log's end and status 1
  rm -rf "$2"
  "$bin" build --input "$1" --out "$2" --partitions 4 --threads "$3" --quiet > "$2.log" 2>&1 || { tail -3 "$2.log" >&2; return 1; }
}
together() {  # INPUT... OUT_PREFIX: one-thread builds of every input at once; status 1 if any failed
  local prefix=${!#} pids=() i=0 failed=0
  for input in "${@:1:$#-1}"; do build "$input" "$prefix$i" 1 & pids+=($!); i=$((i + 1)); done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}
ratio() { awk -v a="$1" -v b="$2" -v m="${3:-1}" 'BEGIN { printf "%.2f", m * a / b }'; }
copies=${COPIES:-0}
cpu_rows=()
echo "| round | whole/1 s | whole/$n s | piece/1 s | pieces×$n s | copies×$n s | build $n/1 | ceiling $n×piece/pieces | ceiling $n×whole/copies | sharded whole/pieces | sha256 $n×one/all |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$rounds"); do
  c=$(cpu); s=$(now); build "$corpus" "$work/whole1" 1 || status=1; w1=$(since "$s"); cw1=$(cpu_since "$c")
  c=$(cpu); s=$(now); build "$corpus" "$work/wholen" "$n" || status=1; wn=$(since "$s"); cwn=$(cpu_since "$c")
  d1=$("$bin" digest "$work/whole1" | md5sum) dn=$("$bin" digest "$work/wholen" | md5sum)
  [ "$d1" = "$dn" ] || { echo "digest at $n threads differs from 1 thread's" >&2; status=1; }
  rm -rf "$work/whole1" "$work/wholen"
  p=${pieces[$(( (round - 1) % n ))]}
  s=$(now); build "$p" "$work/piece" 1 || status=1; p1=$(since "$s")
  rm -rf "$work/piece"
  s=$(now); together "${pieces[@]}" "$work/p" || status=1; pn=$(since "$s")
  rm -rf "$work"/p[0-9]*
  cn=0 cratio=— ccn=— cinfl=—
  if [ "$copies" = 1 ]; then
    copy_inputs=()
    for i in $(seq "$n"); do copy_inputs+=("$corpus"); done
    c=$(cpu); s=$(now); together "${copy_inputs[@]}" "$work/c" || status=1; cn=$(since "$s"); ccn=$(cpu_since "$c")
    cinfl="$(ratio "$ccn" "$(awk -v c="$cw1" -v n="$n" 'BEGIN { print c * n }')")×"
    rm -rf "$work"/c[0-9]*
    cratio="$(ratio "$w1" "$cn" "$n")×"
  fi
  s=$(now); sha256sum "$p" > /dev/null; h1=$(since "$s")
  s=$(now)
  for i in $(seq "$n"); do sha256sum "$p" > /dev/null & done
  wait
  hn=$(since "$s")
  printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s× | %s× | %s | %s× | %s× |\n" "$round" "$w1" "$wn" "$p1" "$pn" "$cn" \
    "$(ratio "$w1" "$wn")" "$(ratio "$p1" "$pn" "$n")" "$cratio" "$(ratio "$w1" "$pn")" "$(ratio "$h1" "$hn" "$n")"
  cpu_rows+=("$(printf "| %s | %.1f | %.1f | %s | %s× | %s |" "$round" "$cw1" "$cwn" "$ccn" "$(ratio "$cwn" "$cw1")" "$cinfl")")
done
echo
echo "| round | CPU s whole/1 | CPU s whole/$n | CPU s copies×$n | whole/$n ÷ whole/1 | copies×$n ÷ ($n × whole/1) |"
echo "|---:|---:|---:|---:|---:|---:|"
printf "%s\n" "${cpu_rows[@]}"
exit $status
