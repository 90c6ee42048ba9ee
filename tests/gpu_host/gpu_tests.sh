#!/usr/bin/env bash
# On a GPU host, with a bundle made by prepare.sh: the GPU tests (every GPU path against the CPU
# processor and brute force, fresh random inputs each run), then warp-search's GPU paths against its
# CPU path on Cranfield and CISI (runs identical byte for byte: one ranking; CISI with 65-, 200- and
# 1,000-word queries added; Cranfield again in the query syntax), then the cluster test with every leaf on the GPU, batching, and again
# on --processor auto (the scheduler), and the near-real-time writes test on both. Logs land in OUT;
# exit status 0 only if everything passed.
# usage: tests/gpu_host/gpu_tests.sh BUNDLE OUT
set -uo pipefail
bundle=$(realpath "${1:?usage: gpu_tests.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: gpu_tests.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
status=0
for test in gpu_processor_test gpu_constraints_test gpu_indexer_test live_writes_test; do
  "$bin/$test" > "$out/$test.log" 2>&1 || status=1
  grep -E "random seed|FAILED|PASSED|SKIPPED" "$out/$test.log" | head -20
done
work=$(mktemp -d)
tr -c 'a-z\n' ' ' < "$bundle/data/cisi/docs.jsonl" | tr ' ' '\n' | awk 'length($0) > 3' | sort -u > "$work/words.txt"
cp "$bundle/data/cisi/queries.tsv" "$work/cisi-queries.tsv"
for n in 65 200 1000; do
  printf 'long%d\t%s\n' $n "$(shuf -n $n --random-source="$work/words.txt" "$work/words.txt" | tr '\n' ' ')"
done >> "$work/cisi-queries.tsv"
paths=("cpu" "gpu" "gpu --gpu-batch-threshold 200000 --gpu-batch-max 8")
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] && paths+=("gpu --gpu-batch-threshold 200000 --gpu-batch-max 8 --gpu-devices 0,1 --gpu-replicas 2")
for collection in cranfield cisi; do
  queries=$bundle/data/$collection/queries.tsv
  [ $collection = cisi ] && queries=$work/cisi-queries.tsv
  "$bin/warp-indexer" build --input "$bundle/data/$collection/docs.jsonl" --out "$work/$collection" --partitions 2 --quiet
  for mode in and or andor; do
    for path in "${paths[@]}"; do
      name=$(echo "$path" | tr -dc 'a-z0-9')
      # shellcheck disable=SC2086
      "$bin/warp-search" --index "$work/$collection" --queries "$queries" --mode $mode --processor $path -k 100 \
        --threads 8 --run "$work/run.$collection.$mode.$name" 2> "$work/search.log" || { tail -3 "$work/search.log"; status=1; }
      if ! cmp -s "$work/run.$collection.$mode.cpu" "$work/run.$collection.$mode.$name"; then
        echo "DIFFER: $collection $mode --processor $path"; status=1
      fi
    done
    echo "$collection $mode: ${#paths[@]} runs identical ($(wc -l < "$work/run.$collection.$mode.cpu") lines)"
  done
done
# The query syntax on Cranfield: each topic's second word required and its last but one excluded.
awk -F'\t' '{n = split($2, w, " "); t = ""; for (i = 1; i <= n; i++) t = t " " (i == 2 ? "+" : i == n - 1 && n > 4 ? "-" : "") w[i]; print $1 "\t" t}' \
  "$bundle/data/cranfield/queries.tsv" > "$work/syntax-queries.tsv"
for mode in and or andor; do
  for path in "${paths[@]}"; do
    name=$(echo "$path" | tr -dc 'a-z0-9')
    # shellcheck disable=SC2086
    "$bin/warp-search" --index "$work/cranfield" --queries "$work/syntax-queries.tsv" --syntax query --mode $mode \
      --processor $path -k 100 --threads 8 --run "$work/syntax.$mode.$name" 2> "$work/search.log" || { tail -3 "$work/search.log"; status=1; }
    cmp -s "$work/syntax.$mode.cpu" "$work/syntax.$mode.$name" || { echo "DIFFER: syntax $mode --processor $path"; status=1; }
  done
  echo "cranfield syntax $mode: ${#paths[@]} runs identical ($(wc -l < "$work/syntax.$mode.cpu") lines)"
done
mkdir -p "$work/build/indexer" "$work/build/leaf" "$work/build/broker"
ln -s "$bin/warp-indexer" "$work/build/indexer/"; ln -s "$bin/warp-broker" "$work/build/broker/"
ln -s "$bin/warp-leaf" "$work/build/leaf/"; ln -s "$bin/warp-search" "$work/build/leaf/"
for leaf_args in "--processor gpu --gpu-batch-threshold 200000 --gpu-batch-max 8 --gpu-lanes 1" \
                 "--processor auto --scheduler-calibration-ms 300 --inline-max-postings 0"; do
  name=$(echo "$leaf_args" | awk '{print $2}')
  WARP_LEAF_ARGS="$leaf_args" python3 tests/integration/cluster_test.py "$work/build" \
    "$bundle/data/cranfield" "$bundle/data/cisi" > "$out/cluster_test_$name.log" 2>&1
  code=$?
  echo "cluster_test with leaves on $leaf_args: exit $code"
  [ $code -eq 0 ] || { tail -5 "$out/cluster_test_$name.log"; status=1; }
done
# Writes searched before a generation holds them, with the generation's lists on the GPU.
for leaf_args in "--processor gpu" "--processor auto --scheduler-calibration-ms 300"; do
  name=$(echo "$leaf_args" | awk '{print $2}')
  WARP_LEAF_ARGS="$leaf_args" python3 tests/integration/live_search_test.py "$work/build" \
    "$bundle/data/cranfield" > "$out/live_search_test_$name.log" 2>&1
  code=$?
  echo "live_search_test with leaves on $leaf_args: exit $code"
  [ $code -eq 0 ] || { tail -5 "$out/live_search_test_$name.log"; status=1; }
done
rm -rf "$work"
echo "gpu_tests: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
