#!/usr/bin/env bash
# On a GPU host, with a bundle made by prepare.sh: filters and facets on the GOV2-like preset
# (25.2 million documents, generated columns `lang` and `year`) through filter_bench: the query log
# in OR and AND mode at k 10, unfiltered and under three filters, on the CPU processor and the GPU's
# lanes (16 client threads each; every GPU answer must be the CPU's), the filters' evaluation alone
# and the facets' pass. Writes OUT/filter_bench.md (results: tests/bench/results/cpu-queries.md).
# usage: tests/gpu_host/filter_bench.sh BUNDLE OUT [DOCUMENTS]
set -uo pipefail
bundle=$(realpath "${1:?usage: filter_bench.sh BUNDLE OUT [DOCUMENTS]}") out=$(realpath -m "${2:?usage: filter_bench.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
mkdir -p "$out"
"$bin/filter_bench" --gov2-docs "${3:-25205179}" --threads 16 | tee "$out/filter_bench.md"
exit "${PIPESTATUS[0]}"
