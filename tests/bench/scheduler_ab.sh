#!/usr/bin/env bash
# On the GPU machine: scheduler_bench in several configurations one after another over one index,
# for A/B comparisons within one machine start (starts differ by 10-15%). Prepared as for
# scheduler_device_run.sh (tests/gpu/prepare-device-run.sh; the default corpus gzipped at
# .device-carry/sched/gcide.jsonl.gz); .device-carry/sched/bin.tar.gz, if present, is unpacked
# over .device-bin first (the carry limit: the binaries compressed).
# usage: tests/bench/scheduler_ab.sh 'LABEL|scheduler_bench flags[|BINARY]' ...
#   BINARY (default .device-bin/scheduler_bench): another build's scheduler_bench, for an A/B.
#   common flags in SCHED_AB_COMMON (default below); each configuration's table, log and CSV land
#   in $OUT as LABEL.md, LABEL.log, LABEL.csv.
set -uo pipefail
out=${OUT:-/tmp/warp-sched-ab}
mkdir -p "$out" /opt/deps
[ -f .device-carry/sched/bin.tar.gz ] && tar -xzf .device-carry/sched/bin.tar.gz
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
common=${SCHED_AB_COMMON:---start-rate 20000 --step 1.3 --seconds 1 --calibration-ms 1000 --repeat 3 --refine 2}
work=$(mktemp -d)
gunzip -c .device-carry/sched/gcide.jsonl.gz > "$work/gcide.jsonl"
.device-bin/warp-indexer build --input "$work/gcide.jsonl" --out "$work/gcide" --partitions 2 --quiet
status=0
for config in "$@"; do
  label=${config%%|*}
  rest=${config#*|}
  flags=${rest%%|*}
  bin=.device-bin/scheduler_bench
  [ "$rest" != "$flags" ] && bin=${rest#*|}
  echo "== $label: $flags ($bin)"
  # shellcheck disable=SC2086  # the flags are words
  "$bin" --index "$work/gcide" $common $flags --out "$out/$label.csv" \
    > "$out/$label.md" 2> "$out/$label.log" || status=1
  grep -E "^\| (cpu|gpu|best-serial|scheduler|split) |thread\(s\):" "$out/$label.md"
done
exit $status
