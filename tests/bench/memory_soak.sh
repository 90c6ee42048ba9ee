#!/usr/bin/env bash
# memory_soak: the services' resident memory against their documented bounds
# (docs/operations/services.md, "Memory bounds"), everything on this machine on loopback: 4 leaves
# (2 partitions x 2 replicas) over INDEX_DIR and a broker with bearer tokens and
# --max-connections 2000; QUERIES distinct uncached queries (1-4 random words of WORDS and a term of
# their own each, 64 connections), then ATTACK_SECONDS of the slow-body attack (slow_body_attack.py:
# 600 connections, each ~56 KiB of header and a body one byte short of its ~106 KiB, half with a
# valid token) while 4 connections go on searching, then AFTER_SECONDS of nothing. Every process's
# RSS is sampled each second (rss_sampler.py). Writes OUT/memory-soak.csv, OUT/memory-soak.png
# (plot_memory_soak.py) and OUT/memory-soak.md (the table: RSS at start, the most in each phase, at
# the end, and the broker's bound for its flags). Leaves on their CPUs (SOAK_LEAF_FLAGS: other leaf
# flags). KEEP_WORK=1 keeps the scratch folder (the logs). Needs the binaries (warp-leaf, warp-broker,
# http_load), python3 and matplotlib.
# usage: tests/bench/memory_soak.sh BIN_DIR INDEX_DIR WORDS OUT [QUERIES] [ATTACK_SECONDS] [AFTER_SECONDS]
set -uo pipefail
bin=$(realpath "$1") index=$(realpath "$2") words=$(realpath "$3") out=$(realpath -m "$4")
queries=${5:-2000000} attack=${6:-600} after=${7:-60}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
echo "work: $work" >&2
pids=()
cleanup() {
  touch "$work/stop"
  { for p in "${pids[@]}"; do kill -9 "$p"; done; wait; } 2>/dev/null
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=tests/bench/edge_cluster.sh
. "$here/edge_cluster.sh"
token=soak-$RANDOM$RANDOM
echo "$token" > "$work/tokens"
chmod 600 "$work/tokens"
cores=$(nproc)
threads=$(( cores / 2 > 0 ? cores / 2 : 1 ))  # the broker's default I/O threads
max_connections=2000 cache_mb=64 body_mb=64 max_in_flight=1024
start_edge_leaves "$bin" "$index" "$work" "${SOAK_LEAF_FLAGS:---processor cpu}"
EDGE_MAX_CONNECTIONS=$max_connections start_edge_broker "$bin" "$work" "--auth-tokens $work/tokens --admin-listen 127.0.0.1:8182 --cache-mb $cache_mb \
  --max-body-mb-in-flight $body_mb --max-in-flight $max_in_flight --threads $threads"
wait_edge_ready 8182 || exit 1  # probes on the admin port, which needs no token
names=(broker leaf0 leaf1 leaf2 leaf3)
broker_pid=${pids[4]}
samplers=("broker=$broker_pid")
for i in 0 1 2 3; do samplers+=("leaf$i=${pids[$i]}"); done
phase() { echo "$1" > "$work/phase"; echo "== $1 ($(date +%T))" >&2; }
phase start
python3 "$here/rss_sampler.py" "$out/memory-soak.csv" "$work/phase" "$work/stop" "${samplers[@]}" &
sampler=$!
sleep 3
load() {  # load SECONDS CONNECTIONS: distinct uncached searches with the token; prints the answered count
  "$bin/http_load" --address 127.0.0.1:8181 --words "$words" --distinct --connections "$2" --seconds "$1" \
    --header "Authorization: Bearer $token" --label soak
}
phase "uncached queries"
answered=0 rows=()
while [ "$answered" -lt "$queries" ]; do
  row=$(load 15 64) || { echo "http_load failed" >&2; exit 1; }
  rows+=("$row")
  answered=$(( answered + $(echo "$row" | awk -F'|' '{gsub(/ /, "", $5); print $5}') ))
  echo "  $answered of $queries answered" >&2
done
phase "slow-body attack"
load "$attack" 4 > "$work/during.txt" &
during=$!
python3 "$here/slow_body_attack.py" 127.0.0.1:8181 "$attack" --token "$token" > "$work/attack.txt"
wait $during
phase "after"
sleep "$after"
touch "$work/stop"
wait $sampler
# The broker's bound for its flags: the process at the start of the soak, the cache, the bodies in
# flight, a full header (8 KiB + 3 x --max-query-bytes, ~56 KiB) per allowed connection, an
# analyzer's stem cache per I/O thread (2^15 words, ~3.4 MiB), a few KiB of replies per query in
# the fan-out.
python3 - "$out/memory-soak.csv" "$out/memory-soak.md" "$out/memory-soak.png" "$here" "$threads" \
  "$max_connections" "$cache_mb" "$body_mb" "$max_in_flight" "$queries" "$attack" "$after" \
  "$(cat "$work/attack.txt")" "$(cat "$work/during.txt")" "${rows[@]}" <<'PY'
import csv, subprocess, sys
(samples, md, png, here, threads, conns, cache, body, in_flight, queries, attack, after, attack_line,
 during, *loads) = sys.argv[1:]
rows = list(csv.DictReader(open(samples)))
names = [n for n in rows[0] if n not in ("seconds", "phase")]
phases = []
for r in rows:
    if not phases or phases[-1] != r["phase"]:
        phases.append(r["phase"])
def val(r, n):
    return float(r[n]) if r[n] else 0.0
start = {n: val(rows[0], n) for n in names}
bound = start["broker"] + int(cache) + int(body) + int(conns) * (8 + 3 * 16) / 1024 + int(threads) * 3.4 + int(in_flight) * 8 / 1024
with open(md, "w") as f:
    f.write("RSS in MiB, sampled each second; %s queries, %s s of the slow-body attack, %s s after.\n\n" % (queries, attack, after))
    f.write("| process | start | " + " | ".join("most, " + p for p in phases if p != "start") + " | end | bound |\n")
    f.write("|---|---:|" + "---:|" * (len(phases) - 1) + "---:|---:|\n")
    for n in names:
        most = [max(val(r, n) for r in rows if r["phase"] == p) for p in phases if p != "start"]
        f.write("| %s | %.0f | %s | %.0f | %s |\n" % (n, start[n], " | ".join("%.0f" % m for m in most), val(rows[-1], n),
                                                    "%.0f" % bound if n == "broker" else "—"))
    f.write("\nBroker bound: %.0f MiB at start + %s cache + %s bodies + %s connections × 56 KiB + %s threads × 3.4 + %s × 8 KiB = %.0f MiB.\n"
            % (start["broker"], cache, body, conns, threads, in_flight, bound))
    f.write("\n%s\n\nSearches during the attack (4 connections):\n\n%s\n\nUncached load, each 15 s:\n\n" % (attack_line, during))
    f.write("| label | connections | idle | answers | q/s | p50 ms | p90 ms | p99 ms | max ms | not 200 | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    f.write("\n".join(loads) + "\n")
plot = [sys.executable, here + "/plot_memory_soak.py", samples, png, "broker=%.0f" % bound]
if subprocess.run(plot).returncode != 0:  # a host without matplotlib: the CSV is there to plot elsewhere
    print("no plot drawn here; later: " + " ".join(plot[1:]), file=sys.stderr)
print(open(md).read())
PY
