#!/usr/bin/env bash
# End to end through the real binaries: warp-indexer builds Cranfield (plus broken records) into
# partitions on disk, warp-search answers the Cranfield queries into a TREC run, and bad input
# gets clear errors. usage: cli_test.sh WARP_INDEXER WARP_SEARCH CRANFIELD_DIR
set -euo pipefail
indexer=$1 search=$2 data=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Cranfield plus a malformed line, a record without id and a duplicate id.
cp "$data/docs.jsonl" "$work/docs.jsonl"
printf '%s\n' '{"id": "broken", "title": ' '{"title": "no id"}' \
  '{"id": "1", "title": "replacement of document one", "body": "zeppelin"}' \
  '{"id": "odd id\twith 100%", "title": "quetzalcoatl", "body": "an id with whitespace"}' >> "$work/docs.jsonl"
"$indexer" build --input "$work/docs.jsonl" --out "$work/index" --partitions 3 --codec pfor-ding 2> "$work/build.log" \
  || { cat "$work/build.log"; fail "warp-indexer build failed"; }
grep -q "docs.jsonl:1401: malformed JSON" "$work/build.log" || fail "malformed line not reported with file:line"
grep -q "docs.jsonl:1402: missing \"id\"" "$work/build.log" || fail "missing id not reported"
grep -q "1401 documents" "$work/build.log" || fail "expected 1401 documents (duplicate replaced)"
grep -q "2 rejected, 1 replaced" "$work/build.log" || fail "rejected/replaced counts missing"
grep -q "documents/s" "$work/build.log" || fail "no progress rate printed"
[ -f "$work/index/manifest.json" ] && [ -d "$work/index/part-0002" ] || fail "index layout"

# GPU indexers: where a GPU is usable the build equals the CPU build row for row; elsewhere it
# fails with the reason and leaves no output or run files behind.
"$indexer" digest "$work/index" > "$work/cpu.digest"
if "$indexer" build --input "$work/docs.jsonl" --out "$work/gpu-index" --partitions 3 --codec pfor-ding \
     --gpu-indexers 1 --quiet 2> "$work/gpu.log"; then
  "$indexer" digest "$work/gpu-index" | cmp -s - "$work/cpu.digest" || fail "--gpu-indexers 1 built other partitions"
else
  grep -q "no GPU indexer: " "$work/gpu.log" || { cat "$work/gpu.log"; fail "--gpu-indexers without a GPU: no clear reason"; }
  [ ! -e "$work/gpu-index/manifest.json" ] && [ -z "$(ls -A "$work/gpu-index" 2>/dev/null)" ] || fail "a failed GPU build left output"
fi

# The duplicate id: the last record wins.
"$search" --index "$work/index" --query zeppelin -k 3 > "$work/one.txt" 2>/dev/null
grep -q " 1 " "$work/one.txt" || { cat "$work/one.txt"; fail "replacement document not found"; }
# An id with whitespace is kept as indexed and written to TREC runs in its %XX form (six fields).
printf 'odd\tquetzalcoatl\n' > "$work/odd.tsv"
"$search" --index "$work/index" --queries "$work/odd.tsv" -k 5 --run "$work/run.odd" 2>/dev/null || fail "odd-id query"
[ "$(cat "$work/run.odd")" = "odd Q0 odd%20id%09with%20100%25 1 $(cut -d' ' -f5 "$work/run.odd") warp" ] \
  || { cat "$work/run.odd"; fail "odd id not written in its safe form"; }
"$search" --index "$work/index" --query quetzalcoatl -k 1 2>/dev/null | grep -q "odd id" || fail "odd id not kept as indexed"

# Long natural-language queries (65, 200 and 1000 distinct terms, repeats included) are answered.
awk 'NR <= 1400 { print }' "$data/docs.jsonl" | tr -c 'a-z\n' ' ' | tr ' ' '\n' | awk 'length($0) > 3' \
  | sort -u > "$work/words.txt"
for n in 65 200 1000; do
  printf 'long%d\t%s %s\n' $n "$(head -n $n "$work/words.txt" | tr '\n' ' ')" "$(head -n 5 "$work/words.txt" | tr '\n' ' ')"
done > "$work/long.tsv"
for mode in and or andor; do
  "$search" --index "$work/index" --queries "$work/long.tsv" --mode $mode -k 10 --threads 2 --run "$work/run.long" \
    2> "$work/long.log" || { cat "$work/long.log"; fail "long queries ($mode)"; }
done
[ "$(cut -d' ' -f1 "$work/run.long" | sort -u | wc -l)" -eq 3 ] || fail "every long query should be answered"

for mode in and or andor; do
  "$search" --index "$work/index" --queries "$data/queries.tsv" --mode $mode -k 100 --threads 2 \
    --run "$work/run.$mode" 2> "$work/search.log" || { cat "$work/search.log"; fail "warp-search $mode"; }
  grep -q "225 queries, mode $mode" "$work/search.log" || fail "no summary for $mode"
  grep -q "q/s; latency ms mean" "$work/search.log" || fail "no latency percentiles"
  awk 'NF != 6 || $2 != "Q0" || $6 != "warp" { exit 1 }' "$work/run.$mode" || fail "run file is not TREC format"
done
[ "$(cut -d' ' -f1 "$work/run.or" | sort -u | wc -l)" -eq 225 ] || fail "OR run should answer every query"
# Ranks are 1..n per query and scores never increase.
awk '{ if ($1 != q) { q = $1; r = 0; s = 1e30 } r++; if ($4 != r || $5 > s + 1e-9) exit 1; s = $5 }' "$work/run.or" \
  || fail "ranks or score order broken"
# The same index searched one partition at a time covers disjoint documents.
"$search" --index "$work/index/part-0000" --query "boundary layer" -k 5 > /dev/null 2>&1 || fail "single partition"

# The GPU processor: the same top-k as the CPU where a GPU exists, a clear error where none does.
if "$search" --index "$work/index" --queries "$data/queries.tsv" --processor gpu -k 10 --run "$work/run.gpu" 2> "$work/gpu.log"; then
  "$search" --index "$work/index" --queries "$data/queries.tsv" -k 10 --run "$work/run.cpu" 2> /dev/null
  # One ranking: documents and scores identical, line for line.
  cmp -s "$work/run.gpu" "$work/run.cpu" || fail "GPU and CPU runs differ"
else
  grep -q "no usable GPU\|no GPU query processor" "$work/gpu.log" || { cat "$work/gpu.log"; fail "unclear GPU error"; }
fi

# Bad input: clear errors, non-zero exit, no crash.
expect_error() {  # expect_error PATTERN command...
  local pattern=$1; shift
  if "$@" > "$work/err.out" 2>&1; then fail "expected failure: $*"; fi
  grep -q "$pattern" "$work/err.out" || { cat "$work/err.out"; fail "expected '$pattern' from: $*"; }
}
expect_error "no such directory\|neither an index" "$search" --index "$work/nowhere" --query x
expect_error "unknown query mode" "$search" --index "$work/index" --query x --mode xor
expect_error "between 1 and 10000" "$search" --index "$work/index" --query x -k 20000
expect_error "unknown flag --bogus" "$search" --index "$work/index" --bogus 1
expect_error "already exists" "$indexer" build --input "$work/docs.jsonl" --out "$work/index" --quiet
expect_error "unknown codec" "$indexer" build --input "$work/docs.jsonl" --out "$work/x" --codec gzip --quiet
expect_error "no such file" "$indexer" build --input "$work/missing.jsonl" --out "$work/y" --quiet
printf 'not json\n' > "$work/bad.jsonl"
expect_error "no documents to index" "$indexer" build --input "$work/bad.jsonl" --out "$work/z" --quiet
# Columns and --filter: a filtered run is the unfiltered ranking with the refused documents left out.
python3 - "$work/fields.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(300):
        f.write(json.dumps({"id": "c%d" % i, "title": "gust %d" % i, "body": "gust " * (1 + i % 7) + "calm " * (i % 3),
                            "kind": ["a", "b", "c"][i % 3], "year": 1990 + i % 20}) + "\n")
PY
"$indexer" build --input "$work/fields.jsonl" --out "$work/fields" --partitions 2 --keyword-fields kind \
  --numeric-fields year --quiet || fail "build with columns"
printf 'q1\tgust calm\n' > "$work/fq.tsv"
"$search" --index "$work/fields" --queries "$work/fq.tsv" -k 300 --run "$work/all.run" 2> /dev/null || fail "unfiltered run"
"$search" --index "$work/fields" --queries "$work/fq.tsv" -k 20 --filter kind:b --filter 'year>=2000' \
  --run "$work/filtered.run" 2> /dev/null || fail "filtered run"
expected=$(awk '{ n = substr($3, 2) + 0; if (n % 3 == 1 && 1990 + n % 20 >= 2000) print $3, $5 }' "$work/all.run" | head -20)
got=$(awk '{ print $3, $5 }' "$work/filtered.run")
[ -n "$got" ] && [ "$got" = "$expected" ] || fail "filtered run: got [$got], expected [$expected]"
expect_error "no field 'colour'" "$search" --index "$work/fields" --query gust --filter colour:red
expect_error "column 1" "$search" --index "$work/fields" --query gust --filter '(kind:a'
# Phrases (--syntax query) on the positions every build keeps: "gust calm" stands in the bodies with
# a calm (c1, c2, c4, ...), "calm gust" in none; an index built with --no-positions refuses them.
printf 'p1\t"gust calm"\np2\t"calm gust" gust\n' > "$work/pq.tsv"
"$search" --index "$work/fields" --queries "$work/pq.tsv" --syntax query -k 300 --run "$work/phrase.run" 2> /dev/null \
  || fail "phrase run"
got=$(awk '$1 == "p1" { n = substr($3, 2) + 0; if (n % 3 == 0) bad++; else good++ } END { print good + 0, bad + 0 }' \
  "$work/phrase.run")
[ "$got" = "200 0" ] || fail "\"gust calm\": [$got] documents with and without the phrase, expected [200 0]"
! grep -q "^p2 " "$work/phrase.run" || fail "\"calm gust\" matched"
"$indexer" build --input "$work/fields.jsonl" --out "$work/plain" --no-positions --quiet || fail "--no-positions build"
expect_error "word positions" "$search" --index "$work/plain" --query '"gust calm"' --syntax query
# A corrupt partition is refused with its name.
sst=$(ls "$work/index/part-0001"/*.sst | head -1)
truncate -s 100 "$sst"
expect_error "part-0001" "$search" --index "$work/index" --query x
"$indexer" --help | grep -q "build" || fail "warp-indexer --help"
"$search" --help | grep -q -- "--mode" || fail "warp-search --help"
echo "cli_test: all checks passed"
