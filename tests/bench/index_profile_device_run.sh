#!/usr/bin/env bash
# Where the build's CPU goes as threads are added: warp-indexer build of 2 GiB of synthetic text at
# each thread count under `perf record -e cpu-clock` (perf carried as Debian packages in
# .device-carry/perf/, unpacked to /opt/perf) and GNU time; per thread count the phases, CPU seconds,
# the top symbols, and (perf_phases.py) each phase's busy threads and top symbols, into $OUT. Binaries from
# .device-carry/sched/bin.tar.gz (.device-bin/); INDEXER: an unstripped warp-indexer for symbol names.
# The packages (Debian 12, `apt-get download` into .device-carry/perf/): linux-perf libbabeltrace1
# libopencsd1 libperl5.36 libpython3.11 libslang2 libunwind8 libdw1 libelf1 libnuma1 libglib2.0-0
# libpcre2-8-0 libbz2-1.0 libcrypt1 libexpat1 libuuid1 time (the GPU machine lacks libglib-2.0).
# BUILD_FLAGS: more flags for every build (e.g. --gpu-analysis); LABEL: a suffix for the output files.
# WHEN: a regular expression of symbols; their samples (and all samples) by tenth of a second of
# the build, into when-THREADS.txt (is a cost spread over the build, or at its start?).
# SCRIPT=1: the samples themselves (`perf script -F tid,time,ip,sym,symoff`, gzip) into
# script-THREADS.txt.gz, for source lines on the development machine (an INDEXER built with -g1,
# addr2line on its copy there).
# usage: tests/bench/index_profile_device_run.sh [THREADS,...] [MEGABYTES]
set -uo pipefail
threads=${1:-1,16} megabytes=${2:-2048}
out=${OUT:-/tmp/warp-profile-out}
mkdir -p "$out" /opt/perf /opt/deps
[ -e .device-carry/sched/bin.tar.gz ] && tar -xzf .device-carry/sched/bin.tar.gz
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
for f in .device-carry/perf/*.deb; do dpkg -x "$f" /opt/perf; done
[ -x /usr/bin/time ] || ln -sf /opt/perf/usr/bin/time /usr/bin/time
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
perf_libs=/opt/perf/usr/lib/x86_64-linux-gnu:/opt/perf/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
perf() { LD_LIBRARY_PATH=$perf_libs /opt/perf/usr/bin/perf "$@"; }
nproc; uname -r; df -h /tmp | tail -1
work=$(mktemp -d)
.device-bin/synthetic_text --out "$work/synthetic.jsonl" --megabytes "$megabytes" 2>&1 | tail -1
cat "$work/synthetic.jsonl" > /dev/null
for t in ${threads//,/ }; do
  rm -rf "$work/index"
  t_label=$t${LABEL:+-$LABEL}
  /usr/bin/time -f "threads $t: %e s real, %U s user, %S s sys, %F major %R minor faults, %c involuntary %w voluntary switches, %M KiB peak" \
    -o "$out/time-$t_label.txt" env LD_LIBRARY_PATH="$perf_libs" /opt/perf/usr/bin/perf record -e cpu-clock -F 2000 -o "$work/perf-$t_label.data" -- \
    "${INDEXER:-.device-bin/warp-indexer}" build --input "$work/synthetic.jsonl" --out "$work/index" --partitions 4 --threads "$t" ${BUILD_FLAGS:-} --quiet \
    > "$out/build-$t_label.log" 2>&1
  cat "$out/time-$t_label.txt"; tail -1 "$out/build-$t_label.log" | sed 's/.*partition(s), //'
  perf report -i "$work/perf-$t_label.data" --no-children --sort sym --stdio 2>/dev/null | grep -v "^#" | grep "%" | head -60 > "$out/symbols-$t_label.txt"
  perf report -i "$work/perf-$t_label.data" --no-children --sort comm,dso --stdio 2>/dev/null | grep -v "^#" | grep "%" | head -20 > "$out/dso-$t_label.txt"
  perf script -F tid,time,ip,sym -i "$work/perf-$t_label.data" 2>/dev/null | python3 tests/bench/perf_phases.py "$out/build-$t_label.log" 2000 \
    > "$out/phases-$t_label.txt" 2>&1
  if [ -n "${WHEN:-}" ]; then
    perf script -F time,ip,sym -i "$work/perf-$t_label.data" 2>/dev/null | awk -v re="$WHEN" '
      $1 ~ /:$/ { t = substr($1, 1, length($1) - 1) + 0; if (start == "") start = t; b = int((t - start) * 10); all[b]++; if (b > last) last = b
                  if ($0 ~ re) hot[b]++ }
      END { print "tenth of a second, all samples, samples of " re; for (i = 0; i <= last; i++) printf "%d %d %d\n", i, all[i], hot[i] }' \
      > "$out/when-$t_label.txt"
  fi
  if [ -n "${SCRIPT:-}" ]; then
    perf script -F tid,time,ip,sym,symoff -i "$work/perf-$t_label.data" 2>/dev/null | gzip > "$out/script-$t_label.txt.gz"
  fi
  rm -f "$work/perf-$t_label.data"
done
rm -rf "$work"
