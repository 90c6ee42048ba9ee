#!/usr/bin/env bash
# The README's first command. Installs the packages, builds, converts the embedded default corpus
# (GCIDE, from the dict-gcide package) to JSONL, indexes it into 2 partitions and answers a query
# from the command line. The broker/leaf cluster will be started from here once those services exist.
# usage: deploy/local/run.sh ["query text"]
set -euo pipefail
cd "$(dirname "$0")/../.."
query=${1:-"striped african horse"}
./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target warp-indexer warp-search
mkdir -p data
[ -f data/gcide.jsonl ] || python3 deploy/corpus/gcide_to_jsonl.py data/gcide.jsonl
if [ ! -f data/gcide-index/manifest.json ]; then
  rm -rf data/gcide-index
  ./build/indexer/warp-indexer build --input data/gcide.jsonl --out data/gcide-index --partitions 2
fi
echo
echo "query: $query"
./build/leaf/warp-search --index data/gcide-index --query "$query" -k 10
echo
echo "more: ./build/leaf/warp-search --index data/gcide-index --query \"your words\" --mode and|or|andor -k N"
