#!/usr/bin/env bash
# On the GPU machine, after tests/gpu/prepare-device-run.sh, with earlier builds' warp-indexer
# copied into .device-bin: the build against the vocabulary's size, binaries side by side
# (index_ab.sh: alternating, every digest checked equal; BINARIES, default
# "old=.device-bin/warp-indexer-old new=.device-bin/warp-indexer"). For each vocabulary in VOCABS
# (default 500000,5000000), MB megabytes of synthetic text (default 2048) on tmpfs, built at
# THREADS (default 1,16) for ROUNDS rounds (default 1). Tables land in $OUT.
# usage: [BINARIES=..] [VOCABS=..] [MB=..] [THREADS=..] [ROUNDS=..] tests/bench/vocabulary_device_run.sh
set -uo pipefail
out=${OUT:-/tmp/warp-vocabulary-out}
mkdir -p "$out" /opt/deps
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TMPDIR=/dev/shm  # the builds' work directories
status=0
vocabs=${VOCABS:-500000,5000000}
for vocabulary in ${vocabs//,/ }; do
  corpus=/dev/shm/synthetic-$vocabulary.jsonl
  .device-bin/synthetic_text --out "$corpus" --megabytes "${MB:-2048}" --vocabulary "$vocabulary" > /dev/null
  echo "## $vocabulary words, ${MB:-2048} MB ($(nproc) cores, $(date -u +%FT%TZ))"
  # shellcheck disable=SC2086 # one LABEL=BINARY a word
  bash tests/bench/index_ab.sh "$corpus" "${THREADS:-1,16}" "${ROUNDS:-1}" ${BINARIES:-old=.device-bin/warp-indexer-old new=.device-bin/warp-indexer} \
    | tee "$out/vocabulary-$vocabulary.md" || status=1
  rm -f "$corpus"
done
exit $status
