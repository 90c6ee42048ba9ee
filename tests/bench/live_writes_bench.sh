#!/usr/bin/env bash
# live_writes_bench: writes through the API searched before a generation holds them (docs/writes.md),
# everything on this machine on loopback: warp-indexer serve over CORPUS (2 partitions, --write,
# --tail, a fold every FOLD_MS), 4 leaves following it with --tail (2 partitions x 2 replicas;
# LIVE_LEAF_FLAGS, default --processor auto), a broker with --indexer and no result cache. Then:
# uncached distinct searches for 15 s with no writes (http_load, 16 connections); the write phases
# of live_writes_load.py (1,000 and 10,000 documents/s, then as fast as 8 connections go), with
# the same searches running through the 10,000/s phase; the table into OUT/live-writes.md and, with
# matplotlib, OUT/live-writes.png (apply delay and visibility by phase). Then, the cluster stopped,
# Xapian's writable database fed the same documents at the same rates (xapian_writes, where built).
# usage: tests/bench/live_writes_bench.sh BIN_DIR CORPUS_JSONL WORDS OUT [SECONDS] [FOLD_MS]
set -uo pipefail
bin=$(realpath "$1") corpus=$(realpath "$2") words=$(realpath "$3") out=$(realpath -m "$4")
seconds=${5:-20} fold_ms=${6:-10000}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
pids=()
cleanup() { { for p in "${pids[@]}"; do kill -9 "$p"; done; wait; } 2>/dev/null; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || true
mkdir -p "$work/in" && cp "$corpus" "$work/in/corpus.jsonl"
token=live-$RANDOM$RANDOM
echo "$token read,write" > "$work/tokens" && chmod 600 "$work/tokens"
"$bin/warp-indexer" serve --input "$work/in" --root "$work/root" --partitions 2 --publish tcp://127.0.0.1:6601 \
  --fetch tcp://127.0.0.1:6602 --write tcp://127.0.0.1:6603 --tail tcp://127.0.0.1:6604 --rescan 5 \
  --fold-interval-ms "$fold_ms" --metrics 127.0.0.1:6610 > "$work/indexer.log" 2>&1 &
pids+=($!)
leaf_ports=()
for i in 0 1 2 3; do
  # shellcheck disable=SC2086
  "$bin/warp-leaf" --follow tcp://127.0.0.1:6601 --tail tcp://127.0.0.1:6604 --unsigned-generations \
    --root "$work/leaf$i" --partitions $((i / 2)) --listen tcp://127.0.0.1:$((6701 + i)) \
    --http 127.0.0.1:$((6801 + i)) ${LIVE_LEAF_FLAGS:---processor auto} > "$work/leaf$i.log" 2>&1 &
  pids+=($!)
  leaf_ports+=($((6801 + i)))
done
"$bin/warp-broker" --listen 127.0.0.1:6900 --indexer tcp://127.0.0.1:6603 --auth-tokens "$work/tokens" --cache-mb 0 \
  --partition 0=tcp://127.0.0.1:6701,tcp://127.0.0.1:6702 --partition 1=tcp://127.0.0.1:6703,tcp://127.0.0.1:6704 \
  > "$work/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" http://127.0.0.1:6900/readyz | grep -q 200 && break
  sleep 0.5
done
search() {  # search SECONDS LABEL: distinct uncached searches, one Markdown row
  "$bin/http_load" --address 127.0.0.1:6900 --words "$words" --distinct --connections 16 --seconds "$1" \
    --header "Authorization: Bearer $token" --label "$2"
}
{
  echo "| load | connections | idle | answers | q/s | p50 ms | p90 ms | p99 ms | max ms | non-200 | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  search 15 "searches, no writes"
} > "$work/search.md"
(sleep 22; search 15 "searches during 10,000 writes/s" >> "$work/search.md") &
searcher=$!
python3 "$here/live_writes_load.py" 127.0.0.1:6900 "$corpus" "$(IFS=,; echo "${leaf_ports[*]}")" "$token" \
  "$out/live-writes.json" "$seconds" 8 1000,10000 > "$work/writes.md" || { cat "$work/"*.log >&2; exit 1; }
wait $searcher
{ for p in "${pids[@]}"; do kill -9 "$p"; done; wait "${pids[@]}"; } 2>/dev/null  # the host to Xapian alone
pids=()
if [ -x "$bin/xapian_writes" ]; then
  "$bin/xapian_writes" --corpus "$corpus" --work "$work/xapian" --seconds "$seconds" > "$work/xapian.md" 2> "$work/xapian.log" ||
    { cat "$work/xapian.log" >&2; echo "xapian_writes failed" > "$work/xapian.md"; }
fi
{
  echo "## Writes ($(nproc) vCPUs, $(date +%F), fold every $fold_ms ms, leaves: ${LIVE_LEAF_FLAGS:---processor auto})"
  echo
  cat "$work/writes.md"
  echo
  echo "## Searches"
  echo
  cat "$work/search.md"
  echo
  echo "Generations built: $(grep -c 'published generation' "$work/indexer.log")"
  if [ -f "$work/xapian.md" ]; then
    echo
    echo "## Xapian, the same documents and rates (one writer, replace + commit, a reader reopened)"
    echo
    cat "$work/xapian.md"
    cat "$work/xapian.log"
  fi
} | tee "$out/live-writes.md"
grep -h "generation\|tail" "$work/indexer.log" | tail -5 >&2
python3 - "$out/live-writes.json" "$out/live-writes.png" <<'PY' || echo "no plot (matplotlib missing?)" >&2
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = json.load(open(sys.argv[1]))
names = [r["phase"].replace(" (bulk of 1,000)", "") for r in rows]
x = range(len(rows))
fig, ax = plt.subplots(figsize=(8, 4))
for key, label, off in (("apply_p50_ms", "apply p50", -0.3), ("apply_p99_ms", "apply p99", -0.1),
                        ("visible_p50_ms", "visible p50", 0.1), ("visible_p99_ms", "visible p99", 0.3)):
    ax.bar([i + off for i in x], [r[key] for r in rows], width=0.2, label=label)
ax.axhline(100, color="grey", linestyle="--", linewidth=1, label="100 ms")
ax.set_xticks(list(x), names, fontsize=8)
ax.set_ylabel("ms (log)")
ax.set_yscale("log")
ax.legend(fontsize=8)
ax.set_title("From acknowledgement to search, by write rate")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
PY
