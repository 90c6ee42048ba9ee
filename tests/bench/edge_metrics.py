#!/usr/bin/env python3
"""Sums of the broker's and the leaves' latency histograms, for the broker-overhead figure.

  edge_metrics.py scrape BROKER_PORT LEAF_PORT...   -> "broker_sum broker_count leaf_sum leaf_count
                                                        stage_count broker_stage_sum transport_sum leaf_stage_sum"
  edge_metrics.py overhead LABEL "BEFORE" "AFTER"    -> "| LABEL | broker ms | leaf ms | overhead ms | stages ms |"
  edge_metrics.py cpu ROLE=PID[,PID...]...          -> "ROLE/THREAD=TICKS ..." (CPU time of every thread)
  edge_metrics.py cpu-per-query QUERIES "BEFORE" "AFTER" -> "ROLE/THREAD µs ..." per query
  edge_metrics.py times-per-query QUERIES "BEFORE" "AFTER" -> µs per query between two lines of
                                                    bash's `times` for the children (the load generator)
Threads are grouped into ZeroMQ's I/O threads ("ZMQbg/...") and the program's own ("main").
Broker: warpsearch_broker_request_seconds (a query's time in the broker, end to end); leaves:
warpsearch_leaf_query_seconds (the search itself). Stages: warpsearch_broker_stage_seconds, a query's
time split along the partition that answered last into the broker's own, the transport's and the
leaf's (docs/operations/monitoring.md); "—" for a broker that does not export them.
"""
import glob
import os
import re
import sys
import urllib.request


def fetch(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()


def sums(text, name):
    s = sum(float(l.split()[-1]) for l in text.splitlines() if re.match(name + r"_sum(\{| )", l))
    c = sum(float(l.split()[-1]) for l in text.splitlines() if re.match(name + r"_count(\{| )", l))
    return s, c


def stage_sums(text):
    values = {}
    for l in text.splitlines():
        m = re.match(r'warpsearch_broker_stage_seconds_(sum|count)\{stage="(\w+)"\} (\S+)', l)
        if m:
            values[(m.group(1), m.group(2))] = float(m.group(3))
    return [values.get(("count", "leaf"), 0.0)] + [values.get(("sum", s), 0.0) for s in ("broker", "transport", "leaf")]


def cpu(specs):
    ticks = {}
    for spec in specs:
        role, pids = spec.split("=")
        for pid in filter(None, pids.split(",")):
            for task in glob.glob("/proc/%s/task/*" % pid):
                try:
                    comm = open(task + "/comm").read().strip()
                    fields = open(task + "/stat").read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                key = "%s/%s" % (role, "zmq-io" if comm.startswith("ZMQbg") else "main")
                ticks[key] = ticks.get(key, 0) + int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


if sys.argv[1] == "cpu":
    print(" ".join("%s=%d" % kv for kv in sorted(cpu(sys.argv[2:]).items())))
elif sys.argv[1] == "times-per-query":
    def seconds(line):  # "0m1.234s 0m0.456s": user and system
        return sum(float(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line))
    print("%.0f" % ((seconds(sys.argv[4]) - seconds(sys.argv[3])) * 1e6 / max(float(sys.argv[2]), 1)))
elif sys.argv[1] == "cpu-per-query":
    queries = float(sys.argv[2])
    before = dict(kv.split("=") for kv in sys.argv[3].split())
    after = dict(kv.split("=") for kv in sys.argv[4].split())
    hz = os.sysconf("SC_CLK_TCK")
    parts = ["%s %.0f" % (k, (int(v) - int(before.get(k, 0))) / hz * 1e6 / max(queries, 1)) for k, v in sorted(after.items())]
    print(", ".join(parts))
elif sys.argv[1] == "scrape":
    broker = fetch("http://127.0.0.1:%s/metrics" % sys.argv[2])  # one scrape: the request and stage sums agree
    b, stages = sums(broker, "warpsearch_broker_request_seconds"), stage_sums(broker)
    leaves = [sums(fetch("http://127.0.0.1:%s/metrics" % p), "warpsearch_leaf_query_seconds") for p in sys.argv[3:]]
    print(b[0], b[1], sum(x[0] for x in leaves), sum(x[1] for x in leaves), *stages)
else:
    label, before, after = sys.argv[2:5]
    b0, c0, l0, k0, *s0 = map(float, before.split())
    b1, c1, l1, k1, *s1 = map(float, after.split())
    broker = (b1 - b0) / (c1 - c0) * 1e3
    leaf = (l1 - l0) / (k1 - k0) * 1e3
    stages = "—"
    if len(s0) == 4 and len(s1) == 4 and s1[0] > s0[0]:
        n = s1[0] - s0[0]
        stages = " / ".join("%.3f" % ((s1[i] - s0[i]) / n * 1e3) for i in (1, 2, 3))
    print("| %s | %.3f | %.3f | %.3f | %s |" % (label, broker, leaf, broker - leaf, stages))
