#!/usr/bin/env python3
"""The repository stands alone: a clone with nothing beside it builds, runs and passes its tests.
Fails if a tracked file (or, outside a git checkout, any file of the tree but build outputs) refers
to a folder beside the checkout, if compiled Python is tracked, or if what the tests and users need
is missing: the licence, the judged test collections with their sources, the documentation's
index; or if the documentation (README.md, docs/, CHANGELOG aside) names a source path in
backquotes that the tree does not hold. usage: self_contained_test.py SOURCE_DIR"""
import glob
import os
import re
import subprocess
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
# Spelt in two pieces so that this file does not match itself.
OUTSIDE = ".." + "/shared"
SKIP_DIRS = {".git", "data", "node_modules", "__pycache__"}


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(folder, n), root) for n in names]
        return files


failures = []
files = tracked_files()
for name in files:
    path = os.path.join(root, name)
    if name.endswith((".pyc", ".pyo")):
        failures.append(f"{name}: compiled Python is tracked")
        continue
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        continue  # listed by git but deleted in the working tree
    if b"\0" in text[:4096]:
        continue  # binary (plots)
    for number, line in enumerate(text.decode("utf-8", "replace").splitlines(), 1):
        if OUTSIDE in line:
            failures.append(f"{name}:{number}: refers to a folder outside the repository: {line.strip()[:120]}")

for needed in ["LICENSE", "README.md", "docs/index.md", "tests/data/README.md",
               "tests/data/cranfield/docs.jsonl", "tests/data/cranfield/queries.tsv", "tests/data/cranfield/qrels.txt",
               "tests/data/cisi/docs.jsonl", "tests/data/cisi/queries.tsv", "tests/data/cisi/qrels.txt"]:
    if not os.path.isfile(os.path.join(root, needed)):
        failures.append(f"{needed}: missing")

# `common/index/partition_reader.cpp`, `leaf/gpu/or_tiles/`, `leaf/query/*_query.cpp`: paths under
# the project's top folders, in backquotes; globs must match something.
TOP = ("broker/", "common/", "deploy/", "docs/", "indexer/", "k8s/", "leaf/", "tests/")
PATH = re.compile(r"`((?:" + "|".join(re.escape(t) for t in TOP) + r")[A-Za-z0-9_./*{},-]*)`")
def ignored(path):
    try:
        return subprocess.run(["git", "-C", root, "check-ignore", "-q", path]).returncode == 0
    except OSError:
        return False


docs = [f for f in files if f.endswith(".md") and (f == "README.md" or f.startswith("docs/"))]
for name in docs:
    try:
        with open(os.path.join(root, name), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        continue
    for number, line in enumerate(lines, 1):
        for named in PATH.findall(line):
            if "{" in named or re.search(r"/[A-Z]{3,}\b", named):
                continue  # brace lists and placeholders (`tests/fuzz/corpus/TARGET/`)
            where = os.path.join(root, named.rstrip("/"))
            if glob.glob(where) or glob.glob(where + ".*") or ignored(named):
                continue  # exists; a module named without its suffix; made by a command (git-ignored)
            failures.append(f"{name}:{number}: names {named}, which the repository does not hold")

for failure in failures:
    print("FAIL", failure)
print(f"self_contained: {len(files)} files checked, {len(failures)} problems")
print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
