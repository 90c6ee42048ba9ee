#!/usr/bin/env bash
# The indexer service through the real binary: serve publishes generations over ZeroMQ on loopback,
# generations are signed (signing-key) and a fetch takes only those its key verifies; fetch
# downloads them, warp-search answers from them, metrics are scraped over HTTP (also past 64
# idle connections, and by HEAD), /healthz and /readyz answer, a changed input makes a new
# generation, SIGTERM stops it cleanly, a restart builds again only where the inputs, the settings
# or the format an older build wrote differ, generations older than the one before the latest are
# removed, and kill -9 mid-build leaves nothing published. usage: indexer_service_test.sh WARP_INDEXER WARP_SEARCH CRANFIELD_DIR
set -euo pipefail
indexer=$1 search=$2 data=$3
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "== $f"; cat "$f"; done >&2; exit 1; }
base=$((20000 + RANDOM % 5900))  # below the ephemeral range, apart from cluster_test (26000+)
pub="tcp://127.0.0.1:$base" fetch="tcp://127.0.0.1:$((base + 1))" metrics="127.0.0.1:$((base + 2))"
wait_for() {  # wait_for SECONDS command...
  local limit=$1; shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
scrape() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://$metrics/metrics', timeout=2).read().decode())"; }
# status PATH [METHOD]: the HTTP status, then the body on the next line (any status, never a failure).
status() {
  python3 - "http://$metrics$1" "${2:-GET}" <<'PY'
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2]), timeout=2)
    print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
PY
}

mkdir -p "$work/in"
cp "$data/docs.jsonl" "$work/in/cran.jsonl"
# Generations signed: the pair from signing-key, the secret one private from its creation.
"$indexer" signing-key --out "$work/signing" > /dev/null || fail "signing-key"
"$indexer" signing-key --out "$work/other" > /dev/null || fail "signing-key (a second pair)"
[ "$(stat -c %a "$work/signing/generation-signing.key")" = 600 ] || fail "the signing key is not mode 0600"
if "$indexer" signing-key --out "$work/signing" 2> "$work/again.log"; then fail "a signing key was overwritten"; fi
grep -q "never overwritten" "$work/again.log" || fail "no reason given for keeping the signing key"
key="$work/signing/generation-signing.pub"
"$indexer" serve --input "$work/in" --root "$work/root" --partitions 2 --publish "$pub" --fetch "$fetch" \
  --metrics "$metrics" --rescan 1 --signing-key "$work/signing/generation-signing.key" 2> "$work/serve.log" &
server=$!; pids+=("$server")
wait_for 30 test -f "$work/root/gen-000001/manifest.json" || fail "generation 1 not published"
# A fetch checks whose generation it takes: without a key it refuses to start, with another key it
# refuses the generation and writes nothing.
if "$indexer" fetch --from "$pub" --root "$work/nokey" --timeout 10 2> "$work/nokey.log"; then fail "fetched without a key"; fi
grep -q -- "--generation-key" "$work/nokey.log" || fail "no clear error without a key: $(cat "$work/nokey.log")"
if "$indexer" fetch --from "$pub" --root "$work/wrong" --timeout 10 --generation-key "$work/other/generation-signing.pub" \
  2> "$work/wrong.log"; then fail "fetched a generation signed by another key"; fi
grep -q "signature does not verify" "$work/wrong.log" || fail "the wrong key's refusal: $(cat "$work/wrong.log")"
[ ! -e "$work/wrong/gen-000001" ] || fail "a refused generation was written"
"$indexer" fetch --from "$pub" --root "$work/leaf" --timeout 10 --generation-key "$key" > "$work/fetched" \
  2> "$work/fetch.log" || fail "fetch: $(cat "$work/fetch.log")"
[ "$(cat "$work/fetched")" = "$work/leaf/gen-000001" ] || fail "unexpected fetch target $(cat "$work/fetched")"
"$search" --index "$work/leaf/gen-000001" --query "boundary layer" -k 3 > "$work/hits" 2>/dev/null || fail "search on fetched"
[ "$(wc -l < "$work/hits")" -eq 3 ] || fail "expected 3 hits"
scrape > "$work/metrics.txt" || fail "metrics scrape"
grep -q '^warpsearch_indexer_generations_published_total 1' "$work/metrics.txt" || fail "generations metric"
grep -q '^warpsearch_indexer_documents_total 1400' "$work/metrics.txt" || fail "documents metric"
# Without --gpu-analysis its counters are exported, at zero.
for name in documents tokens misses failures; do
  grep -q "^warpsearch_indexer_gpu_analysis_${name}_total 0$" "$work/metrics.txt" || fail "gpu analysis $name metric"
done
[ "$(status /healthz | head -1)" = 200 ] || fail "/healthz"
status /readyz > "$work/ready.txt"
[ "$(head -1 "$work/ready.txt")" = 200 ] && grep -q '"generation":1' "$work/ready.txt" || fail "/readyz once generation 1 is out: $(cat "$work/ready.txt")"
[ "$(status /metrics HEAD)" = 200 ] || fail "HEAD /metrics"
[ "$(status /nothing | head -1)" = 404 ] || fail "an unknown path is not 404"
# Idle connections hold sockets, never the server's threads: a scrape after 64 of them is answered
# (prometheus-cpp's server, two threads, had stopped answering after two).
python3 - "${metrics%:*}" "${metrics##*:}" <<'PY' || fail "a scrape behind 64 idle connections"
import socket, sys, time, urllib.request
idle = [socket.create_connection((sys.argv[1], int(sys.argv[2]))) for _ in range(64)]
time.sleep(0.2)
start = time.time()
body = urllib.request.urlopen("http://%s:%s/metrics" % (sys.argv[1], sys.argv[2]), timeout=5).read().decode()
assert "warpsearch_indexer_documents_total" in body, body[:200]
print("scrape behind 64 idle connections: %.1f ms" % ((time.time() - start) * 1000))
PY
fetch_counted() { scrape | grep -q '^warpsearch_indexer_fetch_requests_total [1-9]'; }
wait_for 10 fetch_counted || fail "fetch metric"

# A changed input: a new generation, announced and fetched.
echo '{"id": "new-1", "title": "zeppelin", "body": "a rigid airship"}' > "$work/in/more.jsonl"
wait_for 30 test -f "$work/root/gen-000002/manifest.json" || fail "generation 2 not published"
# Until an announcement names generation 2, a fetch still gets generation 1.
fetched_second() {
  "$indexer" fetch --from "$pub" --root "$work/leaf" --timeout 10 --generation-key "$key" > "$work/fetched2" \
    2>> "$work/fetch.log" &&
    [ "$(cat "$work/fetched2")" = "$work/leaf/gen-000002" ]
}
wait_for 30 fetched_second || fail "generation 2 not fetched: $(cat "$work/fetched2")"
"$search" --index "$work/leaf/gen-000002" --query zeppelin -k 1 2>/dev/null | grep -q "new-1" || fail "new document missing"

kill -TERM "$server"
wait "$server" || fail "serve did not exit cleanly on SIGTERM"
grep -q "stopping" "$work/serve.log" || fail "no stop message"

# Restarts: the same inputs and settings serve the generation there; a generation an older build
# wrote (its inputs.json only the inputs, as before the settings and format were recorded) and
# other settings (--partitions) are built again.
restart() {  # restart LOG [build flags]: serve on the same root in the background
  local log=$1; shift
  "$indexer" serve --input "$work/in" --root "$work/root" --publish "$pub" --fetch "$fetch" --rescan 1 "$@" 2> "$work/$log" &
  server=$!; pids+=("$server")
}
stop() { kill -TERM "$server"; wait "$server" || fail "serve did not exit cleanly ($1)"; }
restart restart-same.log --partitions 2
wait_for 30 grep -q "announcing existing generation 2" "$work/restart-same.log" || fail "restart did not announce generation 2"
sleep 3  # three rescans
if ls "$work/root" | grep -q "gen-000003"; then fail "unchanged inputs and settings were built again"; fi
stop "same settings"
python3 - "$work/root/gen-000002/inputs.json" <<'PY'
import json, sys
recorded = json.load(open(sys.argv[1]))
assert recorded["build"]["format_version"] >= 2 and recorded["build"]["partitions"] == 2, recorded
json.dump(recorded["inputs"], open(sys.argv[1], "w"))  # what a build before the upgrade wrote
PY
restart restart-upgraded.log --partitions 2
wait_for 30 test -f "$work/root/gen-000003/manifest.json" || fail "an older build's generation was not built again"
python3 -c "import json,sys; m = json.load(open(sys.argv[1])); assert m['format_version'] >= 2 and len(m['partitions']) == 2, m" \
  "$work/root/gen-000003/manifest.json" || fail "generation 3's manifest"
stop "upgraded"
restart restart-partitions.log --partitions 3
wait_for 30 test -f "$work/root/gen-000004/manifest.json" || fail "other settings were not built again"
python3 -c "import json,sys; assert len(json.load(open(sys.argv[1]))['partitions']) == 3" "$work/root/gen-000004/manifest.json" \
  || fail "generation 4 has not 3 partitions"
# Older generations are removed once the new one is published (its manifest is written first):
# the one announced and the one before it stay.
pruned() { [ "$(ls "$work/root" | grep '^gen-' | tr '\n' ' ')" = "gen-000003 gen-000004 " ]; }
wait_for 30 pruned || fail "not pruned: $(ls "$work/root")"
grep -q "removed generation 2" "$work/restart-partitions.log" || fail "no line for the pruned generation"
grep -q "announcing unsigned manifests" "$work/restart-partitions.log" || fail "no warning for unsigned manifests"
stop "other partitions"

# kill -9 in the middle of a build: nothing is published; the next start cleans up and publishes.
# The input is large enough for a build of several seconds on two cores (150,000 documents took one
# second once JSONL went through simdjson, and the progress and run file below were then missed).
python3 - "$work/big/big.jsonl" <<'PY'
import json, random, sys, os
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
random.seed(7)
words = [f"w{i}" for i in range(5000)]
with open(sys.argv[1], "w") as f:
    for i in range(600000):
        f.write(json.dumps({"id": f"b{i}", "title": "t", "body": " ".join(random.choices(words, k=60))}) + "\n")
PY
# --no-store --no-positions: what is interrupted here is the spill and its runs; stored forms and
# word positions would only add to the build's time on a 2-core machine.
"$indexer" serve --input "$work/big" --root "$work/root2" --publish "$pub" --fetch "$fetch" --rescan 1 --memory-budget 8 --no-store --no-positions \
  --metrics "$metrics" 2> "$work/serve2.log" &
victim=$!; pids+=("$victim")
# The state to interrupt: a run file spilled, the build half done (never a fixed sleep); its
# progress (bytes read, rate, ETA) on /metrics meanwhile.
mid_build() { ls "$work/root2/gen-000001.runs/"run-* > /dev/null 2>&1; }
progress_shown() { scrape > "$work/metrics2.txt" && grep -q '^warpsearch_indexer_build_bytes_per_second [1-9]' "$work/metrics2.txt"; }
wait_for 60 progress_shown || fail "no build progress on /metrics"
grep -q '^warpsearch_indexer_build_input_total_bytes [1-9]' "$work/metrics2.txt" || fail "no input total on /metrics"
# Not ready while its first generation is being built.
status /readyz > "$work/ready2.txt"
[ "$(head -1 "$work/ready2.txt")" = 503 ] && grep -q '"building":true' "$work/ready2.txt" || fail "/readyz during the first build: $(cat "$work/ready2.txt")"
wait_for 60 mid_build || fail "the build spilled no run file"
kill -9 "$victim"; wait "$victim" 2>/dev/null || true
[ ! -e "$work/root2/gen-000001" ] || fail "a generation appeared although the build was killed"
"$indexer" serve --input "$work/big" --root "$work/root2" --publish "$pub" --fetch "$fetch" --once --rescan 1 --no-store --no-positions \
  2> "$work/serve3.log" &
server=$!; pids+=("$server")
wait_for 120 test -f "$work/root2/gen-000001/manifest.json" || fail "restart did not publish"
grep -q "removing incomplete" "$work/serve3.log" || fail "leftovers of the killed build not removed"
[ -z "$(ls "$work/root2" | grep -v '^gen-000001$')" ] || fail "unexpected files in the root: $(ls "$work/root2")"
kill -TERM "$server"; wait "$server" || fail "second serve did not exit cleanly"
echo "indexer_service_test: all checks passed"
