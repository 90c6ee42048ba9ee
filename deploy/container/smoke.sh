#!/usr/bin/env bash
# Runs the image for real (after deploy/container/build.sh): warp-indexer serve, two leaves (one
# per partition) following it and a broker, each its own container on the host network; indexes
# Cranfield (tests/data), queries through the broker and checks the answers against
# warp-search run from the same image on the same index; stops them. Prints what it saw.
# usage: deploy/container/smoke.sh [IMAGE]
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-localhost/warpsearch:latest}
podman=(podman --runtime runc)
run=("${podman[@]}" run --rm --network host --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
work=$(mktemp -d)
names=()
cleanup() { for n in "${names[@]}"; do "${podman[@]}" rm -f -t 5 "$n" > /dev/null 2>&1 || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/input" "$work/indexer" "$work/leaf0" "$work/leaf1" "$work/signing"
cp tests/data/cranfield/docs.jsonl "$work/input/cran.jsonl"
chown -R 10001:10001 "$work"
tag=$$
start() {  # start NAME ARGS...: a detached container
  local name=warp-smoke-$1-$tag; shift
  "${run[@]}" -d --name "$name" "$@" > /dev/null
  names+=("$name")
}
# The generation signing pair, made by the image itself.
"${run[@]}" --rm -v "$work/signing:/signing" "$image" warp-indexer signing-key --out /signing > /dev/null
start indexer -v "$work/input:/input:ro" -v "$work/indexer:/data" -v "$work/signing:/signing:ro" "$image" \
  warp-indexer serve --input /input --root /data/generations --partitions 2 --publish tcp://127.0.0.1:15601 \
  --fetch tcp://127.0.0.1:15602 --metrics 127.0.0.1:19101 --rescan 5 --signing-key /signing/generation-signing.key
for p in 0 1; do
  start leaf$p -v "$work/leaf$p:/data" -v "$work/signing/generation-signing.pub:/signing.pub:ro" "$image" warp-leaf \
    --follow tcp://127.0.0.1:15601 --root /data --partitions $p --listen tcp://127.0.0.1:1570$p \
    --search-listen 127.0.0.1:1571$p --http 127.0.0.1:1920$p --processor auto --generation-key /signing.pub
done
start broker "$image" warp-broker --listen 127.0.0.1:18080 --partition 0=tcp://127.0.0.1:15700 --partition 1=tcp://127.0.0.1:15701
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:18080/readyz > /dev/null && break
  sleep 0.2
done
curl -sf http://127.0.0.1:18080/readyz > /dev/null || { for n in "${names[@]}"; do "${podman[@]}" logs "$n"; done; echo "FAIL: not ready"; exit 1; }
echo "ready: indexer, 2 leaves and the broker, each in a container of $image"
# The indexer's HTTP listener, as the Kubernetes probes and Prometheus use it.
curl -sf http://127.0.0.1:19101/readyz | grep -q '"ready":true' || { echo "FAIL: the indexer's /readyz"; exit 1; }
curl -sf http://127.0.0.1:19101/healthz > /dev/null || { echo "FAIL: the indexer's /healthz"; exit 1; }
curl -sf http://127.0.0.1:19101/metrics | grep -q '^warpsearch_indexer_generations_published_total 1' || { echo "FAIL: the indexer's /metrics"; exit 1; }
"${podman[@]}" logs "warp-smoke-leaf0-$tag" 2>&1 | head -3
generation=$(ls "$work/indexer/generations" | grep -m1 '^gen-')
checked=0
while IFS=$'\t' read -r qid text; do
  [ $checked -lt 20 ] || break
  answer=$(curl -sf --get --data-urlencode "q=$text" --data-urlencode k=10 http://127.0.0.1:18080/search)
  got=$(echo "$answer" | python3 -c 'import json,sys; a=json.load(sys.stdin); assert not a["partial"]; print(" ".join(h["id"] for h in a["hits"]))')
  printf '%s\t%s\n' "$qid" "$text" > "$work/q.tsv"
  chmod a+r "$work/q.tsv"
  "${run[@]}" -v "$work:/w" "$image" warp-search --index "/w/indexer/generations/$generation" --queries /w/q.tsv -k 10 \
    --run /dev/stdout 2> /dev/null | awk '{printf "%s ", $3}' | sed 's/ $//' > "$work/expected"
  [ "$got" = "$(cat "$work/expected")" ] || { echo "FAIL: query $qid: broker '$got', warp-search '$(cat "$work/expected")'"; exit 1; }
  checked=$((checked + 1))
done < tests/data/cranfield/queries.tsv
direct=$(curl -sf http://127.0.0.1:18080/metrics | awk '/^warpsearch_broker_leaf_requests_total\{path="direct"\}/ {print int($2)}')
[ "${direct:-0}" -ge 10 ] || { echo "FAIL: the broker sent ${direct:-0} searches over the leaves' direct search path"; exit 1; }
echo "smoke: $checked Cranfield queries through the broker in containers equal warp-search on the same generation" \
  "($direct leaf searches over the direct search path)"
