#!/usr/bin/env python3
"""Folders include each other in one direction only: fails on a cycle among the project's source
folders (broker/, common/*, indexer/*, leaf/*, leaf/gpu/*), drawn from the #include lines of every
source file. A cycle means two folders are one module in fact, and neither can be read, built or
tested without the other. usage: include_layers_test.py SOURCE_DIR"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
TOPS = ("broker", "common", "indexer", "leaf")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = (".hpp", ".cpp", ".cu", ".cuh", ".h")


def folder_of(path):
    # The folder that names a module: leaf/gpu/decode/x.cu -> leaf/gpu/decode; indexer/main.cpp -> indexer.
    return os.path.dirname(path)


edges = {}  # folder -> {folder: example "file -> include"}
for top in TOPS:
    for folder, _, names in os.walk(os.path.join(root, top)):
        for name in names:
            if not name.endswith(SOURCE):
                continue
            rel = os.path.relpath(os.path.join(folder, name), root)
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    m = INCLUDE.match(line)
                    if not m or not m.group(1).startswith(tuple(t + "/" for t in TOPS)):
                        continue
                    a, b = folder_of(rel), folder_of(m.group(1))
                    if a != b:
                        edges.setdefault(a, {}).setdefault(b, f"{rel} includes {m.group(1)}")

# Tarjan's strongly connected components: any with more than one folder is a cycle.
index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in edges.get(v, {}):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            cycles.append(sorted(component))


sys.setrecursionlimit(10000)
for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
    if v not in index:
        visit(v)

for cycle in cycles:
    print("FAIL include cycle among", ", ".join(cycle))
    for a in cycle:
        for b, example in sorted(edges.get(a, {}).items()):
            if b in cycle:
                print("   ", example)
print(f"include_layers: {len(index)} folders, {sum(len(w) for w in edges.values())} edges, {len(cycles)} cycles")
print(f"{1 if not cycles else 0} passed, {1 if cycles else 0} failed")
sys.exit(1 if cycles else 0)
