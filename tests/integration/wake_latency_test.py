#!/usr/bin/env python3
"""--cpu-wake-latency-us through the real binaries (a warp-leaf on Cranfield, a warp-broker): where
/dev/cpu_dma_latency can be written (root), each process holds its PM QoS request while it runs
(the host's value in force, read back from the device, is the lowest held) and the request ends
with the process; where it cannot, each says why on stderr and serves anyway. Either way
/metrics reports whether the request is held, searches answer, and a value that is not a whole
number of microseconds is refused at start.
usage: wake_latency_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, signal, struct, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, http  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-wake-")
DEVICE = "/dev/cpu_dma_latency"


def in_force():
    with open(DEVICE, "rb") as f:
        return struct.unpack("i", f.read(4))[0]


def metric(port, name):
    for line in http("http://127.0.0.1:%d/metrics" % port)[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def log(name):
    return open(os.path.join(h.work, name)).read()


try:
    # A value that is not a whole number of microseconds: refused with a clear error.
    for bad in ("-1", "fast", "5us"):
        r = subprocess.run([h.broker, "--partition", "0=tcp://127.0.0.1:1", "--cpu-wake-latency-us", bad],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or "--cpu-wake-latency-us must be" not in r.stderr:
            h.fail("--cpu-wake-latency-us %s: exit %d, %s" % (bad, r.returncode, r.stderr))
    # Another flag's bad value, the same way (it once exited 2 after the cluster had started).
    r = subprocess.run([h.broker, "--partition", "0=tcp://127.0.0.1:1", "--search-path", "carrier-pigeon"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 1 or "--search-path must be direct or zmq, not 'carrier-pigeon'" not in r.stderr:
        h.fail("--search-path carrier-pigeon: exit %d, %s" % (r.returncode, r.stderr))

    writable = os.access(DEVICE, os.W_OK)
    baseline = in_force() if writable else None
    subprocess.run([h.indexer, "build", "--input", os.path.join(data, "docs.jsonl"), "--out", os.path.join(h.work, "index"),
                    "--partitions", "1", "--quiet"], check=True, stderr=subprocess.DEVNULL)
    zmq_port, leaf_http, broker_port = h.next_port(), h.next_port(), h.next_port()
    leaf = h.start([h.leaf, "--index", os.path.join(h.work, "index"), "--listen", "tcp://127.0.0.1:%d" % zmq_port,
                    "--http", "127.0.0.1:%d" % leaf_http, "--processor", "cpu", "--cpu-wake-latency-us", "11"], "leaf.log")
    h.wait_until(lambda: http("http://127.0.0.1:%d/readyz" % leaf_http)[0] == 200, 30, "leaf ready")
    if writable and in_force() != min(11, baseline):
        h.fail("with the leaf's request of 11 µs held, %s reads %d (before: %d)" % (DEVICE, in_force(), baseline))
    broker = h.start([h.broker, "--partition", "0=tcp://127.0.0.1:%d" % zmq_port, "--listen", "127.0.0.1:%d" % broker_port,
                      "--cpu-wake-latency-us", "7"], "broker.log")
    base = "http://127.0.0.1:%d" % broker_port
    h.wait_until(lambda: http(base + "/readyz")[0] == 200, 30, "broker ready")
    status, body = http(base + "/search?q=boundary+layer&k=3")
    if status != 200 or len(json.loads(body)["hits"]) != 3:
        h.fail("search with the requests in place: %d %s" % (status, body))

    held = 1.0 if writable else 0.0
    for name, port, logname in (("broker", broker_port, "broker.log"), ("leaf", leaf_http, "leaf.log")):
        value = metric(port, "warpsearch_%s_cpu_wake_latency_request_held" % name)
        if value != held:
            h.fail("warpsearch_%s_cpu_wake_latency_request_held is %s, expected %s" % (name, value, held))
        said = "holding a CPU wake-up latency request" if writable else "not held ("
        if said not in log(logname):
            h.fail("the %s's log does not say %r" % (name, said))
    if writable:
        if in_force() != min(7, baseline):
            h.fail("with requests of 7 and 11 µs held, %s reads %d (before: %d)" % (DEVICE, in_force(), baseline))
        broker.send_signal(signal.SIGTERM)
        broker.wait(timeout=30)
        if in_force() != min(11, baseline):
            h.fail("the broker stopped, yet %s reads %d, not the leaf's 11 (before: %d)" % (DEVICE, in_force(), baseline))
        leaf.kill()  # a process killed outright releases its request too
        leaf.wait(timeout=30)
        if in_force() != baseline:
            h.fail("both stopped, yet %s reads %d, not %d as before" % (DEVICE, in_force(), baseline))
        print("requests held and released: %s read %d, 11, 7, 11, %d" % (DEVICE, baseline, baseline))
    else:
        print("%s not writable here: both services said why and served without the request" % DEVICE)
finally:
    h.cleanup()
