#!/usr/bin/env python3
"""The repository stands alone: a clone with nothing beside it builds, runs and passes its tests.
Fails if a tracked file (or, outside a git checkout, any file of the tree but build outputs) refers
to a folder beside the checkout, if compiled Python is tracked, or if what the tests and users need
is missing: the licence, the judged test collections with their sources, the documentation's
index. usage: self_contained_test.py SOURCE_DIR"""
import os
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

for failure in failures:
    print("FAIL", failure)
print(f"self_contained: {len(files)} files checked, {len(failures)} problems")
print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
