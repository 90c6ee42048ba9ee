#!/usr/bin/env python3
"""The write load of live_writes_bench.sh against a running cluster (broker with --indexer, leaves
with --tail): phases of documents written at a fixed rate through the broker (NDJSON bulk requests
every 10 ms from one connection), then as fast as WRITERS connections go with bulk requests of 1,000
documents. Documents are the corpus's lines with new ids (live-N) and a term of their own (zqNq).
Per phase: documents acknowledged and per second; the leaves' apply delay (from a write durable at
the indexer to its search on the leaf: warpsearch_leaf_live_apply_delay_seconds, the buckets' deltas
over the phase on every leaf, p50 and p99 by linear interpolation within a bucket); and end to end,
every 50 ms the last acknowledged document (one not probed before) searched for by its term through
the broker until found (p50/p99 of acknowledgement → found; probes slower than 200 ms listed on
stderr with what their searches saw). Prints a Markdown table; writes PHASES.json beside.
usage: live_writes_load.py BROKER CORPUS_JSONL LEAF_METRICS_PORTS(comma) TOKEN OUT_JSON [SECONDS] [WRITERS] [RATES]"""
import http.client, json, sys, threading, time, urllib.parse

broker, corpus, ports, token, out = sys.argv[1:6]
seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 20
writers = int(sys.argv[7]) if len(sys.argv) > 7 else 8
rates = [int(r) for r in (sys.argv[8] if len(sys.argv) > 8 else "1000,10000").split(",")]
host, port = broker.split(":")
leaf_ports = [int(p) for p in ports.split(",")]
lines = [json.loads(l) for l in open(corpus)]
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/x-ndjson"}
next_id = [0]
id_lock = threading.Lock()


def make_docs(n):
    with id_lock:
        first = next_id[0]
        next_id[0] += n
    docs = []
    for i in range(first, first + n):
        src = lines[i % len(lines)]
        docs.append(json.dumps({"id": "live-%d" % i, "title": src.get("title", ""),
                                "body": src.get("body", "") + " zq%dq" % i}))
    return first, "\n".join(docs) + "\n"


refused = [0]  # 429s (the leaves too far behind the log), each sent again after its Retry-After


def post(conn, body):
    while True:
        conn.request("POST", "/indexes/default/documents", body=body.encode(), headers=headers)
        r = conn.getresponse()
        text = r.read()
        if r.status == 429:
            refused[0] += 1
            time.sleep(float(r.getheader("Retry-After", "1")))
            continue
        if r.status != 200:
            raise RuntimeError("bulk: %d %s" % (r.status, text[:200]))
        return json.loads(text)


def histogram():
    """Summed over the leaves: {upper bound: cumulative count}."""
    total = {}
    for p in leaf_ports:
        c = http.client.HTTPConnection("127.0.0.1", p, timeout=5)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith("warpsearch_leaf_live_apply_delay_seconds_bucket"):
                le = line.split('le="')[1].split('"')[0]
                bound = float("inf") if le == "+Inf" else float(le)
                total[bound] = total.get(bound, 0) + float(line.split()[-1])
    return total


def quantile(before, after, q):
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    n = counts[-1] if counts else 0
    if n == 0:
        return float("nan")
    target, lower, below = q * n, 0.0, 0.0
    for b, c in zip(bounds, counts):
        if c >= target:
            if b == float("inf"):
                return lower
            return lower + (b - lower) * (target - below) / max(c - below, 1e-9)
        lower, below = b, c
    return bounds[-2]


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


acked = {"last": None}  # (doc number, acknowledgement time)


def prober(stop, found_after, slow, started):
    """Every 50 ms, the last acknowledged document searched for until found; a probe slower than
    200 ms is kept in `slow` with what its searches saw (when, how many, the slowest search, the
    answers' generation as /cluster gave it) for the reasons behind the tail."""
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    probed = acked["last"]  # a document acknowledged before the phase is not its to measure
    while not stop.is_set():
        last = acked["last"]
        if last is None or last == probed:  # each document once: none acknowledged since the last probe
            time.sleep(0.001)
            continue
        probed = last
        n, t = last
        searches, slowest, partial, cluster = 0, 0.0, 0, None
        while not stop.is_set():
            if cluster is None and time.monotonic() - t > 0.15:  # slow: what the broker sees of the leaves
                conn.request("GET", "/cluster", headers={"Authorization": "Bearer " + token})
                state = json.loads(conn.getresponse().read())
                cluster = {"read_generation": state.get("read_generation"),
                           "replicas": [[r.get("generation"), r.get("staged_generation"), r.get("write_sequence")]
                                        for p in state["partitions"] for r in p["replicas"]]}
            sent = time.monotonic()
            conn.request("GET", "/search?" + urllib.parse.urlencode({"q": "zq%dq" % n, "k": 1}),
                         headers={"Authorization": "Bearer " + token})
            answer = json.loads(conn.getresponse().read())
            searches, slowest = searches + 1, max(slowest, time.monotonic() - sent)
            partial += 1 if answer.get("partial") else 0
            hits = answer.get("hits", [])
            if hits and hits[0]["id"] == "live-%d" % n:
                found_after.append(time.monotonic() - t)
                if found_after[-1] > 0.2:
                    slow.append({"at_s": round(t - started, 3), "visible_ms": round(found_after[-1] * 1e3, 1),
                                 "searches": searches, "slowest_search_ms": round(slowest * 1e3, 1),
                                 "partial": partial, "cluster": cluster})
                break
            time.sleep(0.0005)
        time.sleep(0.05)


def phase(name, run):
    before, refused_before = histogram(), refused[0]
    stop, found, slow = threading.Event(), [], []
    start = time.monotonic()
    probe = threading.Thread(target=prober, args=(stop, found, slow, start))
    probe.start()
    docs = run()
    elapsed = time.monotonic() - start
    time.sleep(1.0)  # the last writes applied
    stop.set()
    probe.join()
    after = histogram()
    row = {"phase": name, "documents": docs, "per_second": docs / elapsed,
           "apply_p50_ms": quantile(before, after, 0.5) * 1e3, "apply_p99_ms": quantile(before, after, 0.99) * 1e3,
           "visible_p50_ms": pct(found, 0.5) * 1e3, "visible_p99_ms": pct(found, 0.99) * 1e3, "probes": len(found),
           "refused_429": refused[0] - refused_before, "slow_probes": slow}
    for s in slow:
        print("%s: probe at %.3f s visible after %.1f ms: %d searches, the slowest %.1f ms, %d partial; at 150 ms "
              "the replicas' [generation, staged, write sequence]: %s" % (
                  name, s["at_s"], s["visible_ms"], s["searches"], s["slowest_search_ms"], s["partial"],
                  json.dumps(s["cluster"])), file=sys.stderr)
    print("| %s | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %d | %d |" % (
        name, docs, row["per_second"], row["apply_p50_ms"], row["apply_p99_ms"], row["visible_p50_ms"],
        row["visible_p99_ms"], len(found), row["refused_429"]), flush=True)
    return row


def at_rate(rate):
    def run():
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        per_tick = max(1, rate // 100)
        sent, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            first, body = make_docs(per_tick)
            post(conn, body)
            acked["last"] = (first + per_tick - 1, time.monotonic())
            sent += per_tick
            delay = start + sent / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        return sent
    return run


def flat_out():
    count, lock = [0], threading.Lock()
    end = time.monotonic() + seconds

    def writer():
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        while time.monotonic() < end:
            first, body = make_docs(1000)
            post(conn, body)
            acked["last"] = (first + 999, time.monotonic())
            with lock:
                count[0] += 1000
    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return count[0]


print("| phase | documents | acknowledged/s | apply p50 ms | apply p99 ms | visible p50 ms | visible p99 ms | probes | 429s |")
print("|---|---|---|---|---|---|---|---|---|")
rows = [phase("%d documents/s" % r, at_rate(r)) for r in rates]
rows.append(phase("as fast as %d connections go (bulk of 1,000)" % writers, flat_out))
json.dump(rows, open(out, "w"), indent=1)
