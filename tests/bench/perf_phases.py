#!/usr/bin/env python3
"""Where a warp-indexer build's CPU went, phase by phase, from `perf script -F tid,time,ip,sym`.

The build's summary line gives the phases' lengths (parse+index, docIDs, merge+encode, write); the
phases are laid end to end from the first sample on. For each phase: samples, the threads busy on
average (samples / (seconds x frequency)) and its top symbols; for the parse and the back end, the
busy threads in 100 ms steps (a phase that scales badly shows whether it is short of work or slow at it).
usage: perf script -F tid,time,ip,sym -i perf.data | perf_phases.py BUILD.log FREQUENCY [TOP]"""
import collections
import re
import sys


def main():
    log, frequency = sys.argv[1], float(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    summary = [line for line in open(log, errors="replace") if line.startswith("wrote ")]
    if not summary:
        sys.exit("perf_phases.py: no summary line in " + log)
    found = re.search(r"parse\+index ([\d.]+), docIDs ([\d.]+), merge\+encode ([\d.]+), write ([\d.]+)", summary[-1])
    if not found:
        sys.exit("perf_phases.py: no phases in the summary line")
    names = ["parse+index", "docIDs", "merge+encode", "write"]
    lengths = [float(x) for x in found.groups()]
    samples = []
    for line in sys.stdin:
        parts = line.split()
        if len(parts) < 2 or not parts[1].rstrip(":").replace(".", "").isdigit():
            continue
        rest = parts[2:]
        if rest and all(c in "0123456789abcdef" for c in rest[0]):  # the ip: the symbol follows, if known
            rest = rest[1:] if len(rest) > 1 and rest[1] != "[unknown]" else rest[:1]
        samples.append((float(parts[1].rstrip(":")), int(parts[0]), " ".join(rest) or "?"))
    if not samples:
        sys.exit("perf_phases.py: no samples")
    samples.sort()
    start = samples[0][0]
    bounds, t = [], start
    for length in lengths:
        bounds.append((t, t + length))
        t += length
    per_phase = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    # parse+index and the back end: phase -> 100 ms step -> tid -> samples
    steps = {0: collections.defaultdict(collections.Counter), 2: collections.defaultdict(collections.Counter)}
    for when, tid, sym in samples:
        phase = next((i for i, (lo, hi) in enumerate(bounds) if when < hi), len(bounds) - 1)
        per_phase[phase][sym] += 1
        totals[phase] += 1
        if phase in steps:
            steps[phase][int((when - bounds[phase][0]) * 10)][tid] += 1
    for i, name in enumerate(names):
        seconds = lengths[i]
        busy = totals[i] / (seconds * frequency) if seconds > 0 else 0
        print(f"== {name}: {seconds:.2f} s, {totals[i]} samples, {busy:.1f} threads busy on average")
        for sym, count in per_phase[i].most_common(top):
            print(f"  {count:7d} {100.0 * count / max(totals[i], 1):5.1f}%  {sym[:110]}")
    per_step = frequency / 10
    for phase, by_step in steps.items():
        print(f"== {names[phase]} by 100 ms: threads busy (samples / {per_step:.0f} per thread), threads seen")
        for step in sorted(by_step):
            counts = by_step[step]
            print(f"  {step / 10:5.1f} s  {sum(counts.values()) / per_step:5.1f} busy  {len(counts):3d} threads")


if __name__ == "__main__":
    main()
