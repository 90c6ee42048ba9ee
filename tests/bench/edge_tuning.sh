#!/usr/bin/env bash
# edge_tuning: the broker's overhead per query against its thread settings and core placement, on
# this machine over loopback (the same cluster as edge_bench.sh: 4 leaves, 2 partitions x 2
# replicas). For each CONFIG, uncached queries (1-4 random words, OR top 10) at 1, 16 and 64
# connections; the overhead is the broker's mean request time minus the leaves' mean query time
# over each run (edge_metrics.py), with the broker's stages (its own time, the transport's, the
# leaf's: warpsearch_broker_stage_seconds).
# CONFIG is "LABEL;BROKER FLAGS;PLACEMENT;LEAF FLAGS;LOAD FLAGS[;BROKER ENV[;LEAF ENV]]" (ENV: VAR=VALUE
# words for env(1), e.g. LD_PRELOAD=/path/libjemalloc.so.2 to try another allocator): PLACEMENT empty (the kernel places
# everything), or "LEAF_CPUS/BROKER_CPUS/CLIENT_CPUS" in taskset's list form (e.g. 0-3/4-11/12-15;
# LEAF_CPUS as four lists joined by ':' pins each leaf on its own, e.g. 0:1:2:3; an empty part
# leaves that side to the kernel);
# EDGE_REPLICAS=N: N replicas of each partition (edge_cluster.sh; default 2).
# LOAD FLAGS go to http_load (e.g. --threads 4). Queries are --distinct (each holds a term of its
# own, so none is a cache hit; without it the warm-up's and earlier loads' queries come back as
# cache hits: ~40% of a 16-connection run); EDGE_DISTINCT= (empty) loads without it.
# usage: tests/bench/edge_tuning.sh BIN_DIR INDEX_DIR WORDS SECONDS CONFIG...
set -uo pipefail
bin=$1 index=$2 words=$3 seconds=$4
shift 4
distinct=${EDGE_DISTINCT---distinct}
leaf_count=$((2 * ${EDGE_REPLICAS:-2}))
here=$(dirname "$0")
# shellcheck source=tests/bench/edge_cluster.sh
. "$here/edge_cluster.sh"
work=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# Context switches of every thread of the leaves and the broker (voluntary: a thread went to sleep).
switches() { for p in "${pids[@]}"; do cat /proc/"$p"/task/*/status; done 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
loads=() overheads=()
for config in "$@"; do
  broker_env="" leaf_env=""
  IFS=';' read -r label broker_flags placement leaf_flags load_flags broker_env leaf_env <<< "$config"
  LEAF_PIN=() BROKER_PIN=() client_pin=() LEAF_CPUS_EACH=()
  if [ -n "$placement" ]; then
    IFS='/' read -r leaf_cpus broker_cpus client_cpus <<< "$placement"
    if [[ $leaf_cpus == *:* ]]; then IFS=':' read -r -a LEAF_CPUS_EACH <<< "$leaf_cpus"
    elif [ -n "$leaf_cpus" ]; then LEAF_PIN=(taskset -c "$leaf_cpus"); fi
    [ -n "$broker_cpus" ] && BROKER_PIN=(taskset -c "$broker_cpus")
    [ -n "$client_cpus" ] && client_pin=(taskset -c "$client_cpus")
  fi
  # shellcheck disable=SC2206  # the environment is words
  [ -n "$leaf_env" ] && LEAF_PIN=(env $leaf_env "${LEAF_PIN[@]}")
  # shellcheck disable=SC2206
  [ -n "$broker_env" ] && BROKER_PIN=(env $broker_env "${BROKER_PIN[@]}")
  start_edge_leaves "$bin" "$index" "$work" "$leaf_flags"
  start_edge_broker "$bin" "$work" "$broker_flags"
  wait_edge_ready
  "${client_pin[@]}" "$bin/http_load" --address 127.0.0.1:8181 --words "$words" --connections 16 --seconds 2 $distinct > /dev/null
  for connections in 1 16 64; do
    before=$(python3 "$here/edge_metrics.py" scrape 8181 $(edge_leaf_http_ports)) switched=$(switches)
    cpu_before=$(python3 "$here/edge_metrics.py" cpu leaf="$(IFS=,; echo "${pids[*]:0:$leaf_count}")" broker="${pids[$leaf_count]}")
    times > "$work/times"; client_before=$(tail -1 "$work/times")
    row=$("${client_pin[@]}" "$bin/http_load" --address 127.0.0.1:8181 --words "$words" --connections $connections $distinct \
      --seconds "$seconds" --label "$label | uncached" $load_flags)
    after=$(python3 "$here/edge_metrics.py" scrape 8181 $(edge_leaf_http_ports)) switched=$(( $(switches) - switched ))
    cpu_after=$(python3 "$here/edge_metrics.py" cpu leaf="$(IFS=,; echo "${pids[*]:0:$leaf_count}")" broker="${pids[$leaf_count]}")
    times > "$work/times"; client_after=$(tail -1 "$work/times")
    loads+=("$row")
    answers=$(cut -d'|' -f6 <<< "$row")
    client_us=$(python3 "$here/edge_metrics.py" times-per-query "$answers" "$client_before" "$client_after")
    overheads+=("$(python3 "$here/edge_metrics.py" overhead "$label | $connections" "$before" "$after") $(( switched / (answers + 1) )) | $(python3 "$here/edge_metrics.py" cpu-per-query "$answers" "$cpu_before" "$cpu_after"), load generator $client_us |")
  done
  stop_all
  sleep 0.5
done
echo "| config | load | connections | idle connections | answers | q/s | p50 ms | p90 ms | p99 ms | max ms | not 200 | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${loads[@]}"
echo
echo "| config | connections | broker ms per uncached query (mean) | leaf query ms (mean) | broker overhead ms | stages ms: broker / transport / leaf | context switches per query | CPU µs per query by thread kind |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${overheads[@]}"
