#!/usr/bin/env python3
"""The most a perfect split of the mixed log could sustain, from scheduler_bench's own figures.

The mixed log is half GOV2-like queries, half default-corpus queries. Each processor's highest rate
within 50 ms p99 on each half alone (the gov2 and default loads, policies cpu and gpu) is taken as
its capacity for that class; the bound is the highest rate R at which some split of each class
between the processors keeps both within capacity:
    GPU: R/2 * (g_gpu / C[gov2][gpu] + d_gpu / C[default][gpu]) <= 1
    CPU: R/2 * ((1 - g_gpu) / C[gov2][cpu] + (1 - d_gpu) / C[default][cpu]) <= 1
It is an upper bound for the scheduler: the CPU-only policy had every core, the scheduler's CPU
threads leave one per GPU stream and one for the front end, and two processors each near its
capacity queue more than one. Prints the bound beside the better single processor's and the
scheduler's measured rates on the mixed log.
usage: scheduler_bound.py BENCH.csv [BENCH.csv...]  (the gov2, default and mixed loads, any files)"""
import csv
import sys
from collections import defaultdict


def highest_within_50ms(points):
    return max((rate for rate, p99 in points if p99 <= 50), default=0.0)


def bound(cap):
    """cap[(load, policy)] -> q/s. Grid over the GPU's share of each half, bisection on R."""
    def feasible(rate):
        half = rate / 2
        steps = 200
        for gi in range(steps + 1):
            g = gi / steps
            for di in range(steps + 1):
                d = di / steps
                gpu = half * (g / cap[("gov2", "gpu")] if g else 0) + half * (d / cap[("default", "gpu")] if d else 0)
                cpu_g = (1 - g) * half / cap[("gov2", "cpu")] if g < 1 and cap[("gov2", "cpu")] else (0 if g == 1 else float("inf"))
                cpu_d = (1 - d) * half / cap[("default", "cpu")] if d < 1 and cap[("default", "cpu")] else (0 if d == 1 else float("inf"))
                if gpu <= 1 and cpu_g + cpu_d <= 1:
                    return True
        return False

    lo, hi = 0.0, 2 * sum(cap.values()) + 1
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo


def main():
    points = defaultdict(list)
    for path in sys.argv[1:]:
        for row in csv.DictReader(open(path)):
            points[(row["load"], row["policy"])].append((float(row["rate"]), float(row["p99_ms"])))
    cap = {key: highest_within_50ms(p) for key, p in points.items()}
    needed = [(load, policy) for load in ("gov2", "default") for policy in ("cpu", "gpu")]
    missing = [f"{load}/{policy}" for load, policy in needed + [("mixed", "gpu"), ("mixed", "scheduler")] if (load, policy) not in cap]
    if missing:
        sys.exit("scheduler_bound.py: no figures for " + ", ".join(missing))
    if cap[("gov2", "gpu")] == 0 or cap[("default", "gpu")] == 0:
        sys.exit("scheduler_bound.py: the GPU sustained no rate within 50 ms on a half")
    for load, policy in needed:
        print(f"capacity {load}/{policy}: {cap[(load, policy)]:.0f} q/s")
    best = max(cap[("mixed", "gpu")], cap.get(("mixed", "cpu"), 0))
    limit = bound(cap)
    scheduler = cap[("mixed", "scheduler")]
    print(f"mixed: a perfect split sustains at most {limit:.0f} q/s = {limit / best:.2f}x the better single processor "
          f"({best:.0f} q/s); the scheduler {scheduler:.0f} q/s = {scheduler / best:.2f}x, {100 * scheduler / limit:.0f}% of the bound")


if __name__ == "__main__":
    main()
