#!/usr/bin/env bash
# On the GPU machine: the edge cluster (edge_tuning.sh: 4 leaves, 2 partitions x 2 replicas, the
# broker, http_load with distinct queries at 1, 16 and 64 connections) with searches over the
# leaves' direct search path and over ZeroMQ (the broker's --search-path zmq), alternating, ROUNDS
# rounds; then, with CURVE=1, both again with Curve on (keys from warp-indexer keys).
# .device-carry/serve-bench.tar.gz holds .serve-bench/ (warp-leaf, warp-broker, warp-indexer,
# http_load, gcide.jsonl.gz: the default corpus); the index and the word list are made here.
# EDGE_BENCH=1 first runs edge_bench.sh with every default (its 10,000-idle-connection probe too).
# usage: [EDGE_BENCH=1] [OLD=1] [CURVE=1] [LOOPS="8 4"] [FRONT_ENDS="1 4"] [ALLOCATORS="jemalloc tcmalloc mimalloc"] [ZMQ=0]
#        [CURVE_ONLY=1] tests/bench/transport_cluster_device_run.sh [ROUNDS] [SECONDS]
set -uo pipefail
rounds=${1:-2} seconds=${2:-4}
mkdir -p /opt/deps
for f in .device-debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
rm -rf .serve-bench && tar -xzf .device-carry/serve-bench.tar.gz
nproc; lscpu | grep "Model name"; date -u
gunzip -c .serve-bench/gcide.jsonl.gz > /tmp/gcide.jsonl
.serve-bench/warp-indexer build --input /tmp/gcide.jsonl --out .serve-bench/index --partitions 2 --quiet
tr -c 'a-z\n' ' ' < /tmp/gcide.jsonl | tr ' ' '\n' | awk 'length($0) > 2' | sort -u > .serve-bench/words.txt
wc -l < .serve-bench/words.txt
if [ "${EDGE_BENCH:-0}" = 1 ]; then  # the edge table with every default: uncached 16 and 64, cached, 10,000 idle
  echo "== edge_bench.sh, defaults"
  bash tests/bench/edge_bench.sh .serve-bench .serve-bench/index .serve-bench/words.txt "$seconds" 10000
fi
configs=()
for round in $(seq "$rounds"); do
  configs+=("direct path, round $round;;;;")
  [ "${ZMQ:-1}" = 1 ] && configs+=("ZeroMQ, round $round;--search-path zmq;;;")  # ZMQ=0: the direct path alone
  # OLD=1: ZeroMQ as the thirty-ninth session's default ran it, a loop per core.
  [ "${OLD:-0}" = 1 ] && configs+=("ZeroMQ, 16 loops, round $round;--search-path zmq --threads 16;;;")
  # LOOPS="8 4": the direct path again with the broker on that many event loops (--threads).
  for loops in ${LOOPS:-}; do configs+=("direct path, $loops loops, round $round;--threads $loops;;;"); done
  # FRONT_ENDS="1 4": the direct path again with the leaves' --search-threads at each count.
  for n in ${FRONT_ENDS:-}; do configs+=("direct path, $n leaf front ends, round $round;;;--search-threads $n;"); done
  # ALLOCATORS="jemalloc tcmalloc mimalloc": the direct path again with the broker's malloc from that
  # library (LD_PRELOAD, the Debian package's; the leaves on glibc's), and with the leaves' as well.
  for a in ${ALLOCATORS:-}; do
    lib=$(ls /opt/deps/usr/lib/x86_64-linux-gnu/lib${a/tcmalloc/tcmalloc_minimal}.so.? 2>/dev/null | head -1)
    [ -n "$lib" ] || { echo "no library for allocator $a"; continue; }
    configs+=("direct path, broker on $a, round $round;;;;;LD_PRELOAD=$lib")
    configs+=("direct path, broker and leaves on $a, round $round;;;;;LD_PRELOAD=$lib;LD_PRELOAD=$lib")
  done
done
[ "${CURVE_ONLY:-0}" = 1 ] || bash tests/bench/edge_tuning.sh .serve-bench .serve-bench/index .serve-bench/words.txt "$seconds" "${configs[@]}"
if [ "${CURVE:-0}" = 1 ]; then
  .serve-bench/warp-indexer keys --out /tmp/edge-keys > /dev/null
  echo "== Curve on"
  EDGE_CURVE=/tmp/edge-keys bash tests/bench/edge_tuning.sh .serve-bench .serve-bench/index .serve-bench/words.txt "$seconds" \
    "direct path, Curve;;;;" "ZeroMQ, Curve;--search-path zmq;;;"
fi
