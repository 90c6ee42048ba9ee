#!/usr/bin/env python3
"""Plots scheduler_bench's CSV: p99 and mean delay against the arrival rate, one panel per load,
one line per policy (Ding et al. 2009 Fig. 7). usage: plot_scheduler.py BENCH.csv OUT.png"""
import csv
import sys
from collections import defaultdict

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
loads = list(dict.fromkeys(r["load"] for r in rows))
fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 4.2), squeeze=False)
styles = {"cpu": "tab:blue", "gpu": "tab:green", "best-serial": "tab:gray", "scheduler": "tab:red"}
others = iter(["tab:olive", "tab:purple", "tab:orange", "tab:brown", "tab:cyan", "tab:pink"])
for policy in dict.fromkeys(r["policy"] for r in rows):  # one colour per policy, p99 and mean alike
    styles.setdefault(policy, next(others, None))
first_policies = set()
for ax, load in zip(axes[0], loads):
    series = defaultdict(list)
    for r in rows:
        if r["load"] == load:
            series[r["policy"]].append((float(r["rate"]), float(r["p99_ms"]), float(r["mean_ms"])))
    for policy, points in series.items():
        points.sort()
        rates = [p[0] for p in points]
        ax.plot(rates, [p[1] for p in points], "-o", ms=3, color=styles.get(policy), label=policy + " p99")
        ax.plot(rates, [p[2] for p in points], ":", color=styles.get(policy), label=policy + " mean")
    ax.axhline(50, color="black", lw=0.6, ls="--")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels overlap
    ax.set_yscale("log")
    ax.set_ylim(0.05, 2000)
    ax.set_xlabel("arrival rate (queries/s, Poisson)")
    ax.set_ylabel("delay (ms)")
    ax.set_title(load)
    ax.grid(True, which="both", lw=0.3)
    if ax is axes[0][0] or set(series) != first_policies:  # a legend wherever the policies differ
        ax.legend(fontsize=7, ncol=2)
    if ax is axes[0][0]:
        first_policies = set(series)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
