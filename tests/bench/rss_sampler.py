#!/usr/bin/env python3
"""Samples the resident memory (VmRSS) of processes every second into a CSV (seconds since the
start, then one column of MiB per process), with a phase column the caller sets by writing the
phase's name into PHASE_FILE. Stops when STOP_FILE exists or every process has exited.
usage: rss_sampler.py OUT.csv PHASE_FILE STOP_FILE NAME=PID..."""
import os, sys, time

out, phase_file, stop_file = sys.argv[1:4]
procs = [arg.split("=", 1) for arg in sys.argv[4:]]


def rss_mib(pid):
    try:
        for line in open("/proc/%s/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


start = time.time()
with open(out, "w") as f:
    f.write("seconds,phase," + ",".join(name for name, _ in procs) + "\n")
    while not os.path.exists(stop_file):
        values = [rss_mib(pid) for _, pid in procs]
        if all(v is None for v in values):
            break
        try:
            phase = open(phase_file).read().strip()
        except OSError:
            phase = ""
        f.write("%.1f,%s,%s\n" % (time.time() - start, phase, ",".join("" if v is None else "%.1f" % v for v in values)))
        f.flush()
        time.sleep(max(0.0, 1 - (time.time() - start) % 1))
