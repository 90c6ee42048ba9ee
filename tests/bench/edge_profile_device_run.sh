#!/usr/bin/env bash
# On the GPU machine: where the serving path's CPU goes under load. The edge benchmark's cluster
# (4 leaves: 2 partitions x 2 replicas, the broker, http_load, all on this machine) under
# CONNECTIONS uncached connections, with `perf record -a` over the middle of the run: CPU by
# thread and library, the top symbols (kernel included), and the system calls of one second by
# thread and number (per query: divide by http_load's sendmsg calls, one a request).
# perf comes as Debian packages in .device-carry/perf/ (see index_profile_device_run.sh).
# usage: tests/bench/edge_profile_device_run.sh [CONNECTIONS] [BROKER FLAGS]
set -uo pipefail
connections=${1:-16} broker_flags=${2:-}
out=${OUT:-/tmp/warp-edge-profile}
mkdir -p "$out" /opt/perf /opt/deps
if [ -e .device-carry/serve-bench.tar.gz ]; then rm -rf .serve-bench; tar -xzf .device-carry/serve-bench.tar.gz; fi
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
for f in .device-carry/perf/*.deb; do dpkg -x "$f" /opt/perf; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
perf_libs=/opt/perf/usr/lib/x86_64-linux-gnu:/opt/perf/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
perf() { LD_LIBRARY_PATH=$perf_libs /opt/perf/usr/bin/perf "$@"; }
bin=.serve-bench work=$(mktemp -d) pids=()
stop_all() { for p in "${pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT
ulimit -n 65536
# shellcheck source=tests/bench/edge_cluster.sh
. "$(dirname "$0")/edge_cluster.sh"
start_edge_leaves "$bin" "$bin/index" "$work"
start_edge_broker "$bin" "$work" "$broker_flags"
wait_edge_ready || exit 1
"$bin/http_load" --address 127.0.0.1:8181 --words "$bin/words.txt" --connections "$connections" --seconds 2 --distinct > /dev/null
"$bin/http_load" --address 127.0.0.1:8181 --words "$bin/words.txt" --connections "$connections" --seconds 9 --distinct \
  --label "profiled | uncached" > "$out/load.txt" &
load=$!
sleep 2
perf record -a -F 1999 -o "$work/perf.data" -- sleep 4 2> /dev/null
perf record -a -e raw_syscalls:sys_enter -o "$work/sys.data" -- sleep 1 2> "$out/sys-record.err"
wait $load
cat "$out/load.txt"
answers=$(cut -d'|' -f6 < "$out/load.txt" | tr -d ' ')
echo "queries/s during the profile: about $(( answers / 9 ))"
perf report -i "$work/perf.data" --no-children --sort comm,dso --stdio 2>/dev/null | grep "%" | head -40 > "$out/comm-dso.txt"
perf report -i "$work/perf.data" --no-children --sort comm,sym --stdio 2>/dev/null | grep "%" | head -120 > "$out/comm-sym.txt"
perf report -i "$work/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep "%" | head -80 > "$out/sym.txt"
perf script -i "$work/sys.data" -F comm,trace 2>/dev/null | awk '{c[$1" "$3]++} END {for (k in c) print c[k], k}' | sort -rn | head -60 > "$out/syscalls.txt"
echo "== by thread and library"; head -30 "$out/comm-dso.txt"
echo "== top symbols"; head -50 "$out/sym.txt"
echo "== system calls in 1 s (count, thread, NR)"; head -40 "$out/syscalls.txt"; head -3 "$out/sys-record.err"
