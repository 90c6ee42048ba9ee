# Sourced by the edge benchmarks: the cluster they load, on this machine over loopback. 4 leaves
# (2 partitions x 2 replicas, ZeroMQ on 5801-5804, HTTP on 9301-9304; EDGE_REPLICAS=N: N replicas
# of each partition, leaf i on 5801+i and 9301+i, partition i / N) and a broker on 8181; each
# process id is appended to the caller's `pids`. LEAF_PIN / BROKER_PIN (arrays, optional): a
# command to start them under, such as `taskset -c 0-5`; LEAF_CPUS_EACH (array, optional): leaf i
# pinned to the CPUs of its i-th entry (taskset's list form) instead. Each leaf offers its direct
# search path on 5901+i (EDGE_DIRECT=0: none; the broker's --search-path zmq keeps to ZeroMQ
# either way). EDGE_MAX_CONNECTIONS: the broker's --max-connections (20000). EDGE_CURVE=DIR: leaves and broker with --curve-keys DIR (warp-indexer keys --out DIR).
# usage: start_edge_leaves BIN INDEX LOG_DIR [LEAF FLAGS]; start_edge_broker BIN LOG_DIR [BROKER FLAGS];
#        wait_edge_ready [PORT]

start_edge_leaves() {
  local bin=$1 index=$2 logs=$3 flags=${4:-} i replicas=${EDGE_REPLICAS:-2}
  for i in $(seq 0 $((2 * replicas - 1))); do
    local extra=()
    [ "${EDGE_DIRECT:-1}" = 1 ] && extra+=(--search-listen 127.0.0.1:$((5901 + i)))
    [ -n "${EDGE_CURVE:-}" ] && extra+=(--curve-keys "$EDGE_CURVE")
    local pin=("${LEAF_PIN[@]}")
    [ -n "${LEAF_CPUS_EACH[$i]:-}" ] && pin=(taskset -c "${LEAF_CPUS_EACH[$i]}")
    # shellcheck disable=SC2086  # the flags are words
    "${pin[@]}" "$bin/warp-leaf" --index "$index" --partitions $((i / replicas)) --listen tcp://127.0.0.1:$((5801 + i)) \
      --http 127.0.0.1:$((9301 + i)) --workers 4 "${extra[@]}" $flags 2> "$logs/leaf$i.log" &
    pids+=($!)
  done
}

start_edge_broker() {
  local bin=$1 logs=$2 flags=${3:-} replicas=${EDGE_REPLICAS:-2} p r
  local partitions=() extra=()
  [ -n "${EDGE_CURVE:-}" ] && extra+=(--curve-keys "$EDGE_CURVE")
  for p in 0 1; do
    local endpoints=()
    for r in $(seq 0 $((replicas - 1))); do endpoints+=("tcp://127.0.0.1:$((5801 + p * replicas + r))"); done
    partitions+=(--partition "$p=$(IFS=,; echo "${endpoints[*]}")")
  done
  # shellcheck disable=SC2086
  "${BROKER_PIN[@]}" "$bin/warp-broker" --listen 127.0.0.1:8181 "${partitions[@]}" --max-connections "${EDGE_MAX_CONNECTIONS:-20000}" "${extra[@]}" $flags 2> "$logs/broker.log" &
  pids+=($!)
}

# The leaves' HTTP ports, for their metrics.
edge_leaf_http_ports() { seq 9301 $((9300 + 2 * ${EDGE_REPLICAS:-2})); }

# Until the broker's /readyz answers 200 (every partition has a ready replica), at most 30 s.
wait_edge_ready() {
  local port=${1:-8181}
  for _ in $(seq 300); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/readyz', timeout=1)" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "edge cluster: the broker on port $port was not ready within 30 s" >&2
  return 1
}
