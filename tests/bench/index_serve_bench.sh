#!/usr/bin/env bash
# index_serve_bench: builds inside `warp-indexer serve`, the indexer service a deployment runs, where
# one process builds generation after generation. Its first build pays for the process's start (with
# --gpu-analysis: the CUDA context, 0.35-0.4 s on the H100 host); the next ones find it made. For each
# LABEL=BINARY[ FLAGS] in turn (rounds alternating), a serve process builds CORPUS GENERATIONS times (the
# input touched after each generation is published; the one before removed) and the published build
# times are printed, then each label's first builds and later builds as medians; every generation's
# digest is checked against the same generation's first one (a partition's meta holds its generation).
# usage: tests/bench/index_serve_bench.sh CORPUS GENERATIONS ROUNDS LABEL=BINARY[ FLAGS]...
#   e.g. TMPDIR=/dev/shm tests/bench/index_serve_bench.sh syn.jsonl 4 2 cpu=bin/warp-indexer 'gpu=bin/warp-indexer --gpu-analysis'
# PARTITIONS (4) and THREADS (16) as the other indexing benchmarks.
set -uo pipefail
corpus=$1 generations=$2 rounds=$3
shift 3
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
status=0
declare -A firsts laters first_digest
echo "| label | round | build s, generation 1 … $generations |"
echo "|---|---:|---|"
for round in $(seq "$rounds"); do
  for pair in "$@"; do
    label=${pair%%=*}
    read -ra cmd <<< "${pair#*=}"
    root=$work/root log=$work/serve.log
    rm -rf "$root"
    "${cmd[0]}" serve "${cmd[@]:1}" --input "$corpus" --root "$root" --partitions "${PARTITIONS:-4}" --threads "${THREADS:-16}" \
      --rescan 1 --publish "tcp://127.0.0.1:${PUBLISH_PORT:-27561}" --fetch "tcp://127.0.0.1:${FETCH_PORT:-27562}" > "$log" 2>&1 &
    pid=$!
    times=()
    for g in $(seq "$generations"); do
      for _ in $(seq 1200); do
        grep -q "published generation $g:" "$log" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
      done
      line=$(grep -o "published generation $g: .*" "$log")
      [ -z "$line" ] && { echo "$label: generation $g not published"; tail -3 "$log"; status=1; break; }
      times+=("$(sed 's/.*partitions, \([0-9.]*\) s.*/\1/' <<< "$line")")
      gen_dir=$(printf '%s/gen-%06d' "$root" "$g")
      digest=$("${cmd[0]}" digest "$gen_dir" | md5sum | cut -c1-12)
      [ -z "${first_digest[$g]:-}" ] && first_digest[$g]=$digest
      [ "$digest" != "${first_digest[$g]}" ] && { echo "digest of $label generation $g differs: $digest against ${first_digest[$g]}"; status=1; }
      rm -rf "$(printf '%s/gen-%06d' "$root" $((g - 1)))"
      touch "$corpus"  # a new modification time: the next rescan builds the next generation
    done
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    grep -q "GPU analysis failed\|unusable\|no GPU" "$log" && { echo "$label: $(grep -m1 'GPU' "$log")"; }
    echo "| $label | $round | ${times[*]} |"
    firsts[$label]+="${times[0]:-} "
    laters[$label]+="${times[*]:1} "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "| label | first builds | median | later builds | median |"
echo "|---|---|---:|---|---:|"
for pair in "$@"; do
  label=${pair%%=*}
  echo "| $label | ${firsts[$label]}| $(median <<< "${firsts[$label]}") | ${laters[$label]}| $(median <<< "${laters[$label]}") |"
done
exit $status
