#!/usr/bin/env python3
"""Draws a memory soak's RSS samples (rss_sampler.py's CSV): one line per process, the phases
shaded, and each documented bound as a dashed line of its process's colour.
usage: plot_memory_soak.py SAMPLES.csv OUT.png [NAME=BOUND_MIB...]"""
import csv, sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
bounds = dict(arg.split("=", 1) for arg in sys.argv[3:])
names = [n for n in rows[0].keys() if n not in ("seconds", "phase")]
t = [float(r["seconds"]) / 60 for r in rows]
fig, ax = plt.subplots(figsize=(10, 5))
colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for i, name in enumerate(names):
    ys = [float(r[name]) if r[name] else float("nan") for r in rows]
    ax.plot(t, ys, label=name, color=colours[i % len(colours)], linewidth=1.2)
    if name in bounds:
        ax.axhline(float(bounds[name]), color=colours[i % len(colours)], linestyle="--", linewidth=0.9,
                   label="%s bound (%s MiB)" % (name, bounds[name]))
start = 0
for i in range(1, len(rows) + 1):  # shade each phase, its name at the top
    if i == len(rows) or rows[i]["phase"] != rows[start]["phase"]:
        if rows[start]["phase"]:
            ax.axvspan(t[start], t[i - 1], alpha=0.08 if len(set(r["phase"] for r in rows[:start])) % 2 else 0.16,
                       color="grey")
            if t[i - 1] - t[start] > 0.04 * (t[-1] - t[0]):  # a name where there is room for it
                ax.text((t[start] + t[i - 1]) / 2, 1.01, rows[start]["phase"], transform=ax.get_xaxis_transform(),
                        ha="center", va="bottom", fontsize=8)
        start = i
ax.set_xlabel("minutes")
ax.set_ylabel("resident memory (MiB)")
ax.set_ylim(bottom=0)
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
