#!/usr/bin/env bash
# On the GPU machine: the broker's fan-out transport with no broker or leaf work on it, ZeroMQ
# against plain TCP sockets. Echo servers of one thread each (a leaf's front end), 1, 16 and 64
# client threads each fanning every request out to two of them and waiting for both echoes:
#   - "2 servers": every client to the same two (the servers saturate: Little's law, not transport);
#   - "8 servers": client c to servers 2c and 2c+1 (round the eight), as a broker spreads requests
#     over the replicas of 2 partitions, so that no server is what limits the clients.
# In turn, each: ZeroMQ DEALER/ROUTER (2 client I/O threads) and `--raw` (the client thread writes
# and reads its sockets itself, the server waits in epoll). ROUNDS rounds, alternating.
# IO_THREADS="2 4 8": the 8-server ZeroMQ runs again with each count of client I/O threads.
# usage: [IO_THREADS="2"] tests/bench/transport_device_run.sh [ROUNDS] [ZMQ_RTT]   (ZMQ_RTT: .device-bin/zmq_rtt)
set -uo pipefail
rounds=${1:-2}
rtt=${2:-.device-bin/zmq_rtt}
mkdir -p /opt/deps
for f in .device-debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nproc; lscpu | grep "Model name"; date -u
servers=() zmq=() raw=()
for i in 0 1 2 3 4 5 6 7; do
  "$rtt" server tcp://127.0.0.1:$((6100 + i)) & servers+=($!)
  "$rtt" server tcp://127.0.0.1:$((6200 + i)) --raw & servers+=($!)
  zmq+=(tcp://127.0.0.1:$((6100 + i))) raw+=(tcp://127.0.0.1:$((6200 + i)))
done
trap 'kill "${servers[@]}" 2>/dev/null' EXIT
sleep 0.5
for round in $(seq "$rounds"); do
  for clients in 1 16 64; do
    echo "round $round, $clients client(s), 2 servers:"
    "$rtt" client "${zmq[@]:0:2}" --clients "$clients" --io-threads 2
    "$rtt" client "${raw[@]:0:2}" --clients "$clients" --raw
    [ "$clients" = 1 ] && continue
    echo "round $round, $clients client(s), 8 servers (ZeroMQ with ${IO_THREADS:-2} client I/O threads):"
    for io in ${IO_THREADS:-2}; do "$rtt" client "${zmq[@]}" --fan 2 --clients "$clients" --io-threads "$io"; done
    "$rtt" client "${raw[@]}" --fan 2 --clients "$clients" --raw
  done
done
