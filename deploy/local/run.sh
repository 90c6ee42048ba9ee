#!/usr/bin/env bash
# The README's first command: a Warpsearch cluster on this machine, on loopback.
#   deploy/local/run.sh [start]   install packages, build, convert the default corpus (GCIDE), then start
#                                 the indexer service (2 partitions), 4 leaves (2 partitions x 2 replicas,
#                                 fetching the indexer's generation) and the broker; print the URL.
#   deploy/local/run.sh stop      stop everything (SIGTERM, then SIGKILL after 10 s)
#   deploy/local/run.sh status    what runs, and the broker's /cluster
# Logs and state: data/cluster/. Ports: broker 8080, leaves 5701-5704 (direct search path 5711-5714,
# HTTP 9201-9204), indexer 5601 (announcements), 5602 (files), 5603 (writes), 5604 (the write log's tail), 9101 (metrics). Override the
# broker's with WARP_BROKER_PORT.
set -euo pipefail
cd "$(dirname "$0")/../.."
state=data/cluster
broker_port=${WARP_BROKER_PORT:-8080}

stop_cluster() {
  [ -f "$state/pids" ] || { echo "no cluster running (no $state/pids)"; return 0; }
  while read -r pid name; do kill -TERM "$pid" 2>/dev/null && echo "stopping $name ($pid)" || true; done < "$state/pids"
  for _ in $(seq 100); do
    alive=0
    while read -r pid name; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$state/pids"
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  while read -r pid name; do kill -9 "$pid" 2>/dev/null || true; done < "$state/pids"
  rm -f "$state/pids"
  echo "cluster stopped"
}

case "${1:-start}" in
  stop) stop_cluster; exit 0 ;;
  status)
    [ -f "$state/pids" ] && while read -r pid name; do
      if kill -0 "$pid" 2>/dev/null; then echo "running  $name ($pid)"; else echo "STOPPED  $name ($pid)"; fi
    done < "$state/pids"
    curl -s "http://127.0.0.1:$broker_port/cluster" && echo
    exit 0 ;;
  start) ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

[ -f "$state/pids" ] && stop_cluster
./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build --target warp-indexer warp-leaf warp-broker warp-search
mkdir -p "$state" data/corpus
[ -f data/corpus/gcide.jsonl ] || python3 deploy/corpus/gcide_to_jsonl.py data/corpus/gcide.jsonl

# CurveZMQ between the services (indexer -> leaves, broker -> leaves): a key pair per role, made once.
[ -f "$state/keys/leaf.key" ] || ./build/indexer/warp-indexer keys --out "$state/keys" > /dev/null
# Generations signed by the indexer, checked by every leaf before it is used: a pair made once.
[ -f "$state/signing/generation-signing.key" ] || ./build/indexer/warp-indexer signing-key --out "$state/signing" > /dev/null

run() {  # run NAME command...: start in the background, remember the pid
  local name=$1; shift
  "$@" > "$state/$name.log" 2>&1 &
  echo "$! $name" >> "$state/pids"
}
run indexer ./build/indexer/warp-indexer serve --input data/corpus --root "$state/indexer" --partitions 2 \
  --publish tcp://127.0.0.1:5601 --fetch tcp://127.0.0.1:5602 --metrics 127.0.0.1:9101 --rescan 10 \
  --curve-keys "$state/keys" --signing-key "$state/signing/generation-signing.key" \
  --write tcp://127.0.0.1:5603 --tail tcp://127.0.0.1:5604 --fold-interval-ms 60000 \
  --keyword-fields pos,letter,obsolete --numeric-fields senses
for i in 1 2 3 4; do
  partition=$(( (i - 1) / 2 ))
  run "leaf$i" ./build/leaf/warp-leaf --follow tcp://127.0.0.1:5601 --tail tcp://127.0.0.1:5604 \
    --root "$state/leaf$i" --partitions $partition \
    --listen tcp://127.0.0.1:$((5700 + i)) --search-listen 127.0.0.1:$((5710 + i)) --http 127.0.0.1:$((9200 + i)) \
    --curve-keys "$state/keys" --generation-key "$state/signing/generation-signing.pub"
done
run broker ./build/broker/warp-broker --listen 127.0.0.1:$broker_port --curve-keys "$state/keys" \
  --indexer tcp://127.0.0.1:5603 \
  --partition 0=tcp://127.0.0.1:5701,tcp://127.0.0.1:5702 --partition 1=tcp://127.0.0.1:5703,tcp://127.0.0.1:5704

echo "waiting for the indexer to publish and the leaves to load (the first build takes a few seconds)..."
for _ in $(seq 600); do
  curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$broker_port/readyz" 2>/dev/null | grep -q 200 && break
  sleep 0.2
done
if ! curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$broker_port/readyz" | grep -q 200; then
  echo "the cluster did not become ready; logs in $state/" >&2
  tail -n 5 "$state"/*.log >&2
  exit 1
fi
cat <<MSG

Warpsearch is running: broker http://127.0.0.1:$broker_port  (logs: $state/*.log)

  curl 'http://127.0.0.1:$broker_port/search?q=striped+african+horse&k=5'
  curl -X POST -d '{"q": "aeroplane wing", "k": 3, "mode": "and"}' http://127.0.0.1:$broker_port/search
  curl -X PUT -d '{"title": "Zeppelin", "body": "a rigid airship"}' http://127.0.0.1:$broker_port/indexes/default/documents/z1
  curl http://127.0.0.1:$broker_port/cluster
  curl http://127.0.0.1:$broker_port/metrics

Stop it with: deploy/local/run.sh stop
MSG
# A sample answer (its first lines; written out first so that head closing the pipe fails nothing).
curl -s "http://127.0.0.1:$broker_port/search?q=striped+african+horse&k=3" | python3 -m json.tool > "$state/sample-answer.json"
head -n 30 "$state/sample-answer.json"
