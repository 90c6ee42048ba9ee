#!/usr/bin/env bash
# On a GPU host, with a bundle made by prepare.sh: the query syntax's constraints on the CPU and
# the GPU processors through warp-search. The default corpus in one partition; 2,000 OR queries of
# three words drawn from its documents, as written (`a b c`), with the first word required
# (`+a b c`) and with the last excluded (`a b -c`); each file on `--processor cpu` and `gpu`
# (single-query lanes), 16 client threads, k 10 and 1000; the runs of the two processors must be
# identical byte for byte. Prints the q/s and latency lines (results: tests/bench/results/cpu-queries.md).
# usage: tests/gpu_host/constraints_bench.sh BUNDLE OUT
set -uo pipefail
bundle=$(realpath "${1:?usage: constraints_bench.sh BUNDLE OUT}") out=$(realpath -m "${2:?usage: constraints_bench.sh BUNDLE OUT}")
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu_host/env.sh
. tests/gpu_host/env.sh
work=$(mktemp -d)
gzip -dc "$bundle/data/gcide.jsonl.gz" > "$work/docs.jsonl"
"$bin/warp-indexer" build --input "$work/docs.jsonl" --out "$work/index" --partitions 1 --quiet
python3 - "$work" <<'PY'
import json, random, re, sys
work = sys.argv[1]
docs = [json.loads(line)["body"] for line in open(work + "/docs.jsonl")]
rng = random.Random(7)
queries = []
while len(queries) < 2000:
    words = sorted(set(w.lower() for w in re.findall(r"[A-Za-z]{4,}", rng.choice(docs))))
    if len(words) >= 3:
        queries.append(rng.sample(words, 3))
for name, shape in (("plain", "{} {} {}"), ("required", "+{} {} {}"), ("excluded", "{} {} -{}")):
    with open("%s/%s.tsv" % (work, name), "w") as f:
        for i, q in enumerate(queries):
            f.write("%d\t%s\n" % (i, shape.format(*q)))
PY
status=0
for k in 10 1000; do
  for name in plain required excluded; do
    for processor in cpu gpu; do
      "$bin/warp-search" --index "$work/index" --queries "$work/$name.tsv" --syntax query --mode or -k $k \
        --threads 16 --processor $processor --run "$work/run.$name.$processor" 2> "$work/log" || status=1
      echo "$name k=$k $processor: $(grep -o '[0-9.]* q/s; latency.*' "$work/log")"
    done
    cmp -s "$work/run.$name.cpu" "$work/run.$name.gpu" || { echo "DIFFER: $name k=$k"; status=1; }
  done
done
rm -rf "$work"
exit $status
