#!/usr/bin/env bash
# On the GPU machine: how the host's idle states weigh on the serving path. Prints the CPU idle
# driver and states, then runs the bare ZeroMQ round trip (TCP and IPC) and edge_tuning.sh's
# overhead runs with and without a PM QoS latency request of 0 µs held (hold_cpu_latency.py:
# idle CPUs poll instead of halting), alternating ROUNDS times.
# .serve-bench as for edge_device_run.sh (may come packed as .device-carry/serve-bench.tar.gz).
# usage: tests/bench/edge_idle_device_run.sh [ROUNDS] [SECONDS] [CONFIG...]
set -uo pipefail
rounds=${1:-2} seconds=${2:-5}
shift 2 2>/dev/null || shift $#
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("leaves on auto;;;")
mkdir -p /opt/deps
if [ -e .device-carry/serve-bench.tar.gz ]; then rm -rf .serve-bench; tar -xzf .device-carry/serve-bench.tar.gz; fi
for f in .device-debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nproc; lscpu | grep -E "Model name|Hypervisor"; date -u; uname -r
echo "cmdline: $(cat /proc/cmdline)"
idle=/sys/devices/system/cpu/cpuidle
echo "cpuidle driver: $(cat $idle/current_driver 2>/dev/null || echo none), governor: $(cat $idle/current_governor_ro $idle/current_governor 2>/dev/null | head -1)"
for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
  [ -d "$s" ] && echo "  $(basename "$s"): $(cat "$s/name") latency $(cat "$s/latency") µs, entered $(cat "$s/usage") times"
done
[ -d /sys/module/haltpoll ] && grep -H . /sys/module/haltpoll/parameters/* 2>/dev/null
hold=(python3 tests/bench/hold_cpu_latency.py 0)
# The request is for the whole host: held around the client, it covers the server too.
rtt() {
  .serve-bench/zmq_rtt server "$ep" & local s=$!
  sleep 0.3; "$@" .serve-bench/zmq_rtt client "$ep"; kill $s; wait $s 2>/dev/null
}
for ep in tcp://127.0.0.1:5999 ipc:///tmp/warp-rtt.sock; do
  echo "zmq_rtt $ep, idle as configured:"; ep=$ep rtt
  echo "zmq_rtt $ep, latency request 0 held:"; ep=$ep rtt "${hold[@]}"
done
for round in $(seq "$rounds"); do
  echo "== round $round, idle as configured"
  bash tests/bench/edge_tuning.sh .serve-bench .serve-bench/index .serve-bench/words.txt "$seconds" "${configs[@]}" | grep -v "^|---"
  echo "== round $round, latency request 0 held"
  "${hold[@]}" bash tests/bench/edge_tuning.sh .serve-bench .serve-bench/index .serve-bench/words.txt "$seconds" "${configs[@]}" | grep -v "^|---"
done
for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
  [ -d "$s" ] && echo "  after: $(basename "$s"): $(cat "$s/name") entered $(cat "$s/usage") times"
done
