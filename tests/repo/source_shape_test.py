#!/usr/bin/env python3
"""The product's sources stay readable: fails on a source file (broker/, common/, indexer/, leaf/)
over 600 lines, a function over 150 lines (found by matching braces from a line that opens a
function's body), or a CUDA header (.cuh) that defines a kernel (__global__): headers declare
launchers and hold device functions, kernels live in .cu files. usage: source_shape_test.py SOURCE_DIR"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
MAX_FILE, MAX_FUNCTION = 600, 150
TOPS = ("broker", "common", "indexer", "leaf")
SOURCE = (".hpp", ".cpp", ".cu", ".cuh", ".h")
# A line that opens a function's body: a parameter list closed, then qualifiers, then "{".
OPENS_FUNCTION = re.compile(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>,\s*&]+)?\s*\{\s*$")
NOT_FUNCTION = re.compile(r"^\s*(if|for|while|switch|catch|else|do|return|namespace|struct|class|enum|union)\b|=\s*\[|\[[^\]]*\]\s*\(")


def strip(line):
    line = re.sub(r'"([^"\\]|\\.)*"', '""', line)
    line = re.sub(r"'([^'\\]|\\.)*'", "''", line)
    return re.sub(r"//.*", "", line)


failures = []
files = 0
for top in TOPS:
    for folder, _, names in os.walk(os.path.join(root, top)):
        for name in sorted(names):
            if not name.endswith(SOURCE):
                continue
            files += 1
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) > MAX_FILE:
                failures.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE})")
            if name.endswith(".cuh"):
                for number, line in enumerate(lines, 1):
                    if "__global__" in strip(line):
                        failures.append(f"{rel}:{number}: a kernel defined in a header")
            depth, start, start_depth = 0, None, 0
            for number, raw in enumerate(lines, 1):
                code = strip(raw)
                if start is None and OPENS_FUNCTION.search(code) and not NOT_FUNCTION.search(code):
                    start, start_depth = number, depth
                depth += code.count("{") - code.count("}")
                if start is not None and depth <= start_depth:
                    if number - start + 1 > MAX_FUNCTION:
                        failures.append(f"{rel}:{start}: a function of {number - start + 1} lines (at most {MAX_FUNCTION})")
                    start = None

for failure in failures:
    print("FAIL", failure)
print(f"source_shape: {files} files checked, {len(failures)} problems")
print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
