#!/usr/bin/env python3
"""warp-indexer build under a memory budget, on a corpus several times larger than the budget:
the partitions hold exactly the rows of an unbounded build (warp-indexer digest), with other
thread counts too, and the build's peak RSS stays within the budget plus 25% plus the binary's
own fixed footprint (the peak RSS of a build of a handful of documents, measured here).

usage: index_budget_test.py BUILD_DIR [--sanitized]
  --sanitized: an AddressSanitizer build (its memory is not the program's): a smaller corpus, no RSS
  bound, the identity checks only."""
import json, os, random, shutil, subprocess, sys, tempfile

build = sys.argv[1]
sanitized = "--sanitized" in sys.argv[2:]
indexer = os.path.join(build, "indexer", "warp-indexer")
work = tempfile.mkdtemp(prefix="warp-index-budget-")
BUDGET_MB = 4 if sanitized else 16
CORPUS_BYTES = (12 if sanitized else 68) << 20  # more than 4× the budget


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(1)


def write_corpus(path, target_bytes, seed):
    """Zipf-distributed words over a 60,000-word vocabulary, like text; some ids repeat (the last wins)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 11))) for _ in range(60000)]
    cumulative, total = [], 0.0
    for rank in range(len(vocabulary)):
        total += 1.0 / (rank + 1)
        cumulative.append(total)
    written = 0
    doc = 0
    with open(path, "w") as out:
        while written < target_bytes:
            words = rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(20, 600))
            ident = "d%d" % (doc if rng.random() > 0.01 else rng.randint(0, doc))  # about 1% replace an earlier one
            line = json.dumps({"id": ident, "title": " ".join(words[:6]), "body": " ".join(words[6:])}) + "\n"
            out.write(line)
            written += len(line)
            doc += 1
    return doc


def build_index(inputs, out, *flags):
    """Runs warp-indexer build; returns (peak RSS in MiB as the build reports it, its summary line)."""
    args = [indexer, "build", "--out", out, "--partitions", "3", "--quiet"] + [str(f) for f in flags]
    for path in inputs:
        args += ["--input", path]
    # Its own VmHWM, not wait4's ru_maxrss: that counts this (large) Python process's image too,
    # which the child holds between fork and exec.
    result = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        fail("%s exited %d:\n%s" % (" ".join(args), result.returncode, result.stderr))
    summary = [line for line in result.stderr.splitlines() if line.startswith("wrote ")]
    if not summary or "peak RSS " not in summary[-1]:
        fail("no summary line with the peak RSS:\n" + result.stderr)
    return float(summary[-1].split("peak RSS ")[1].split()[0]), summary[-1]


def digest(out):
    return subprocess.run([indexer, "digest", out], check=True, capture_output=True, text=True).stdout


corpus = os.path.join(work, "corpus.jsonl")
documents = write_corpus(corpus, CORPUS_BYTES, 20261123)
size_mb = os.path.getsize(corpus) / 2**20
print("index_budget_test: corpus %.1f MiB, %d documents; budget %d MiB" % (size_mb, documents, BUDGET_MB))

unbounded_rss, unbounded = build_index([corpus], os.path.join(work, "unbounded"), "--memory-budget", 8192, "--threads", 2)
expected = digest(os.path.join(work, "unbounded"))
print("index_budget_test: unbounded: peak RSS %.0f MiB; %s" % (unbounded_rss, unbounded))

bounded_rss, bounded = build_index([corpus], os.path.join(work, "bounded"), "--memory-budget", BUDGET_MB, "--threads", 2)
print("index_budget_test: budget %d MiB: peak RSS %.0f MiB; %s" % (BUDGET_MB, bounded_rss, bounded))
if digest(os.path.join(work, "bounded")) != expected:
    fail("the bounded build's partitions differ from the unbounded build's")
runs = int(bounded.split(" runs")[0].split()[-1])
if runs < 4:
    fail("the bounded build should have spilled several runs: %s" % bounded)
# The shared stem cache grew past its first segment within the budget.
segments = int(bounded.split(" segment(s)")[0].split()[-1])
if segments < 2:
    fail("the bounded build's stem cache should have opened a second segment: %s" % bounded)

# Other thread counts, the corpus as four files: the same rows.
with open(corpus) as source:
    lines = source.readlines()
for i in range(4):
    part = os.path.join(work, "in", "part-%d.jsonl" % i)
    os.makedirs(os.path.dirname(part), exist_ok=True)
    with open(part, "w") as out:
        out.writelines(lines[i * len(lines) // 4:(i + 1) * len(lines) // 4])
del lines
for threads, parsers, indexers in ((1, 1, 1), (3, 5, 2)):
    out = os.path.join(work, "t%d-%d-%d" % (threads, parsers, indexers))
    _, line = build_index([os.path.join(work, "in")], out, "--memory-budget", BUDGET_MB, "--threads", threads,
                          "--parsers", parsers, "--indexers", indexers, "--split-mb", 1)
    if digest(out) != expected:
        fail("threads %d, parsers %d, indexers %d, four files: the partitions differ" % (threads, parsers, indexers))
    shutil.rmtree(out)
    print("index_budget_test: threads %d, parsers %d, indexers %d, four files: identical" % (threads, parsers, indexers))

if not sanitized:
    # The binary's fixed footprint: the same build of a dozen documents.
    tiny = os.path.join(work, "tiny.jsonl")
    with open(corpus) as source, open(tiny, "w") as out:
        for _ in range(12):
            out.write(source.readline())
    fixed_rss, _ = build_index([tiny], os.path.join(work, "tiny"), "--memory-budget", BUDGET_MB, "--threads", 2)
    limit = fixed_rss + 1.25 * BUDGET_MB
    print("index_budget_test: fixed footprint %.0f MiB; bounded peak %.0f MiB, limit %.0f MiB (fixed + budget × 1.25)" %
          (fixed_rss, bounded_rss, limit))
    if bounded_rss > limit:
        fail("peak RSS %.0f MiB over the limit %.0f MiB" % (bounded_rss, limit))

shutil.rmtree(work, ignore_errors=True)
print("index_budget_test: passed")
