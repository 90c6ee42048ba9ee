#!/usr/bin/env python3
"""Backpressure on writes (docs/writes.md), with the real binaries on loopback: an indexer with
--write, --tail and --max-apply-lag 40, two leaves tailing its write log, a broker. Writes are
taken while the leaves keep up; once a leaf stops applying (SIGSTOP) and the log runs more than 40
writes past what it holds, a write is refused with 429, a Retry-After header and the reason, and
nothing of it is kept; the indexer counts the refusal and shows the lag. When the leaf goes on
(SIGCONT) and catches up, writes are taken again, their sequences right after the last taken.
Each write says what it did: created, replaced, deleted, not_found (201, 200, 200, 404 for one).
The indexer's building thread runs at nice 10, its serving threads at 0 (--build-nice).
usage: write_backpressure_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, signal, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-backpressure-")
fail, wait_until = h.fail, h.wait_until


def ndjson(docs):
    return ("\n".join(json.dumps(d) for d in docs) + "\n").encode()


try:
    c = WritesCluster(h, data, "writer-token-1", indexer_flags=["--max-apply-lag", "40"])
    # What one write at a time says it did.
    for method, path, body, expected_status, expected in (
            ("PUT", "/indexes/default/documents/p1", b'{"body": "pfirst"}', 201, "created"),
            ("PUT", "/indexes/default/documents/p1", b'{"body": "psecond"}', 200, "replaced"),
            ("DELETE", "/indexes/default/documents/p1", None, 200, "deleted"),
            ("DELETE", "/indexes/default/documents/p1", None, 404, "not_found"),
            ("DELETE", "/indexes/default/documents/5", None, 200, "deleted")):  # an input document
        status, text, _ = c.call(method, path, body)
        if status != expected_status or json.loads(text).get("result") != expected:
            fail("%s %s: %d %s, expected %d %s" % (method, path, status, text, expected_status, expected))

    docs = [{"id": "b%d" % i, "body": "bpressure%d" % i} for i in range(30)]
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson(docs))
    if status != 200:
        fail("bulk while the leaves keep up: %d %s" % (status, text[:300]))
    last = json.loads(text)["sequence"]
    if c.search_ids("bpressure17", after=last) != ["b17"]:
        fail("a written document not searched: %s" % (c.search_ids("bpressure17", after=last),))
    wait_until(lambda: c.indexer_metric("warpsearch_indexer_tailing_leaves") == 2 and
               c.indexer_metric("warpsearch_indexer_write_apply_lag") == 0, 30, "both leaves applied everything")

    # Leaf 0 stops applying; 50 more writes are taken (the log was not yet 40 ahead of it).
    c.leaves[0].send_signal(signal.SIGSTOP)
    more = [{"id": "m%d" % i, "body": "mpressure%d" % i} for i in range(50)]
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson(more))
    if status != 200 or json.loads(text)["sequence"] != last + 50:
        fail("the bulk before the lag: %d %s" % (status, text[:300]))
    last += 50
    # Now 50 ahead of leaf 0: refused, clearly, nothing kept.
    status, text, headers = c.call("PUT", "/indexes/default/documents/refused1", b'{"body": "rrefused"}')
    if status != 429 or headers.get("Retry-After") != "1" or "applied the write log up to" not in text:
        fail("a write while a leaf lags 50 behind: %d %s %s" % (status, text, headers))
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson([{"id": "refused2", "body": "rrefused"}]))
    if status != 429:
        fail("a bulk while a leaf lags 50 behind: %d %s" % (status, text[:300]))
    wait_until(lambda: c.indexer_metric("warpsearch_indexer_write_requests_held_back_total") == 2 and
               c.indexer_metric("warpsearch_indexer_write_apply_lag") == 50, 10,
               "the indexer counting 2 refused requests and showing a lag of 50")
    status, text, _ = c.call("GET", "/indexes/default")
    if status != 200 or json.loads(text)["write_sequence"] != last:
        fail("the refused writes took sequences: %d %s (the last taken: %d)" % (status, text, last))

    # Leaf 0 goes on, catches up: writes are taken again, right after the last taken.
    c.leaves[0].send_signal(signal.SIGCONT)
    wait_until(lambda: c.indexer_metric("warpsearch_indexer_write_apply_lag") == 0, 30, "leaf 0 caught up")
    status, text, _ = c.call("PUT", "/indexes/default/documents/after1", b'{"body": "aafter"}')
    if status != 201 or json.loads(text)["sequence"] != last + 1:
        fail("a write once the leaf caught up: %d %s (expected sequence %d)" % (status, text, last + 1))
    if c.search_ids("aafter", after=last + 1) != ["after1"] or c.search_ids("rrefused", after=last + 1) != []:
        fail("after the lag: %s %s" % (c.search_ids("aafter"), c.search_ids("rrefused")))
    if c.search_ids("mpressure42") != ["m42"]:
        fail("a write taken while leaf 0 was stopped is not searched: %s" % (c.search_ids("mpressure42"),))
    # Builds run nicer than what serves (--build-nice 10 by default): the thread that builds (the
    # main one) and what it starts at 10, the sockets', the log's and its tail's at 0.
    pid = c.indexer.pid
    nice = {int(t): int(open("/proc/%d/task/%s/stat" % (pid, t)).read().rsplit(")", 1)[1].split()[16])
            for t in os.listdir("/proc/%d/task" % pid)}
    if nice[pid] != 10 or 0 not in nice.values():
        fail("the indexer's threads' nice values: %s (the building thread %d should be 10, the serving ones 0)"
             % (sorted(nice.values()), pid))
    print("write_backpressure_test: refused with 429 while a leaf lagged 50 writes (bound 40), nothing kept; "
          "taken again once it caught up")
finally:
    h.cleanup()  # SIGKILL ends a stopped leaf too
