#!/usr/bin/env python3
"""Indexing scaling plot from index_bench --csv: MB/s against threads per corpus (warp-indexer, CPU
indexers only as solid lines), Xapian's single-thread figure as a
marker, and linear scaling from one thread as a dashed line; builds with the parsers' analysis on
the GPU (--gpu-analysis) dotted, with GPU indexers dash-dotted.
usage: plot_index_scaling.py BENCH.csv OUT.png"""
import csv, sys
from collections import defaultdict

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt



def gpu_label(engine):
    """warp+2gpu: 2 GPU indexers; warp+gpu-analysis: the parsers' analysis on the GPU."""
    parts = engine.split("+")[1:]
    words = ["--gpu-analysis" if p == "gpu-analysis" else "%s GPU indexers" % p[:-3] for p in parts]
    return ", ".join(words)


rows = list(csv.DictReader(open(sys.argv[1])))
warp = defaultdict(list)
gpu = defaultdict(list)
xapian = {}
for row in rows:
    if row["engine"] == "warp":
        warp[row["corpus"]].append((int(row["threads"]), float(row["mb_per_s"])))
    elif row["engine"].startswith("warp+"):
        gpu[(row["corpus"], row["engine"])].append((int(row["threads"]), float(row["mb_per_s"])))
    else:
        xapian[row["corpus"]] = float(row["mb_per_s"])
fig, ax = plt.subplots(figsize=(7, 4.5))
for i, (corpus, points) in enumerate(sorted(warp.items())):
    points.sort()
    color = "C%d" % i
    threads = [t for t, _ in points]
    ax.plot(threads, [v for _, v in points], "o-", color=color, label="warp-indexer, " + corpus)
    base = dict(points).get(1)
    if base:
        ax.plot(threads, [base * t for t in threads], "--", color=color, alpha=0.4, linewidth=1)
    if corpus in xapian:
        ax.plot([1], [xapian[corpus]], "x", color=color, markersize=9, label="Xapian (1 thread), " + corpus)
    for (gpu_corpus, engine), gpu_points in sorted(gpu.items()):
        if gpu_corpus == corpus:
            gpu_points.sort()
            ax.plot([t for t, _ in gpu_points], [v for _, v in gpu_points], "s:" if "analysis" in engine else "^-.",
                    color=color, label="warp-indexer (%s), %s" % (gpu_label(engine), corpus))
# Xapian on a corpus without warp-indexer rows (the default corpus once, where the scaling runs on it
# repeated): a marker of its own.
for corpus in sorted(set(xapian) - set(warp)):
    ax.plot([1], [xapian[corpus]], "kx", markersize=9, label="Xapian (1 thread), " + corpus)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("threads (--threads)")
ax.set_ylabel("input MB/s")
ax.set_title("Indexing throughput against threads (dashed: linear from 1 thread)")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
