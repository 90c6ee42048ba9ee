#!/usr/bin/env bash
# On a GPU host, with a bundle made by prepare.sh: gpu_bench (copy ceiling, decoders, intersection,
# and the GOV2-like query table: GPU single, 8 lanes, batched, against the CPU processor on every
# core), its tables into OUT/gpu_bench.md. Extra arguments go to gpu_bench. With a second bundle
# BEFORE=DIR, the GOV2-like table of that build's gpu_bench runs first, then this one's, in turn
# ROUNDS times (default 1), so that the two compare on one machine start.
# usage: [BEFORE=BUNDLE2] [ROUNDS=N] tests/gpu_host/gpu_bench.sh BUNDLE OUT [gpu_bench flags...]
set -uo pipefail
bundle=$(realpath "${1:?usage: gpu_bench.sh BUNDLE OUT [flags]}") out=$(realpath -m "${2:?usage: gpu_bench.sh BUNDLE OUT [flags]}")
shift 2
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
status=0
for round in $(seq "${ROUNDS:-1}"); do
  if [ -n "${BEFORE:-}" ]; then
    echo "== before, round $round" | tee -a "$out/gpu_bench_before.md"
    "$(realpath "$BEFORE")/bin/gpu_bench" "$@" 2>&1 | tee -a "$out/gpu_bench_before.md" || status=1
  fi
  echo "== this build, round $round" | tee -a "$out/gpu_bench.md"
  "$bin/gpu_bench" "$@" 2>&1 | tee -a "$out/gpu_bench.md" || status=1
done
exit $status
