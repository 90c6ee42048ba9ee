#!/usr/bin/env python3
"""Run a command while this process holds a PM QoS CPU latency request (/dev/cpu_dma_latency):
while held, the kernel keeps idle CPUs in states that wake within that many microseconds (0: the
polling idle state, where a wake-up needs no interrupt). This is what tuned's latency-performance
profile does for a whole host. Needs write access to /dev/cpu_dma_latency (root).
usage: hold_cpu_latency.py MICROSECONDS COMMAND [ARG...]"""
import os
import struct
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
os.write(fd, struct.pack("i", int(sys.argv[1])))  # held until fd is closed
try:
    sys.exit(subprocess.call(sys.argv[2:]))
finally:
    os.close(fd)
