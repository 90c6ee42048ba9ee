#!/usr/bin/env python3
"""Writes through the broker (the write API, docs/api.md) with the real binaries on loopback; only a
token with the write scope may write (a search token gets 403, none 401):
warp-indexer serve with --write over Cranfield, two leaves following it (one per partition), a
broker with --indexer. A bulk request answered line by line (bad lines refused with their reason,
their neighbours kept, sequences in order); the writes folded into a generation and searchable;
a replace and deletes (a written document and an input one) visible; the answers then identical,
documents and float scores, to warp-search over a fresh build of the same documents; kill -9 of
the indexer in the middle of bulk loads: every acknowledged document searchable once, none twice,
after the restart (requests not acknowledged are sent again, as a client would).
usage: writes_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, shutil, signal, subprocess, sys, threading, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, as_float32, http_method  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-writes-")
work, fail, wait_until, next_port = h.work, h.fail, h.wait_until, h.next_port


WRITER, READER = "writer-token-1", "reader-token-2"


def call(method, url, body=None, timeout=10, token=WRITER):
    return http_method(method, url, body, timeout, token)


try:
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    shutil.copy(os.path.join(data, "docs.jsonl"), os.path.join(inputs, "cran.jsonl"))
    sign, check = h.signing_flags()
    pub, fetch, write, metrics = next_port(), next_port(), next_port(), next_port()
    indexer_args = [h.indexer, "serve", "--input", inputs, "--root", os.path.join(work, "root"), "--partitions", "2",
                    "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch", "tcp://127.0.0.1:%d" % fetch,
                    "--write", "tcp://127.0.0.1:%d" % write, "--rescan", "1", "--fold-interval-ms", "200", "--metrics", "127.0.0.1:%d" % metrics] + sign
    indexer = h.start(indexer_args, "indexer.log")
    leaves, leaf_http = [], []
    for p in (0, 1):
        zmq_port, http_port = next_port(), next_port()
        h.start([h.leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--root", os.path.join(work, "leaf%d" % p),
                 "--partitions", str(p), "--listen", "tcp://127.0.0.1:%d" % zmq_port, "--http",
                 "127.0.0.1:%d" % http_port, "--workers", "2"] + check, "leaf%d.log" % p)
        leaves.append(zmq_port)
        leaf_http.append(http_port)
    broker_port = next_port()
    base = "http://127.0.0.1:%d" % broker_port
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write("%s read,write\n%s\n" % (WRITER, READER))
    os.chmod(tokens, 0o600)
    h.start([h.broker, "--listen", "127.0.0.1:%d" % broker_port, "--partition", "0=tcp://127.0.0.1:%d" % leaves[0],
             "--partition", "1=tcp://127.0.0.1:%d" % leaves[1], "--indexer", "tcp://127.0.0.1:%d" % write,
             "--write-timeout-ms", "3000", "--cache-ttl-s", "1", "--auth-tokens", tokens, "--after-wait-ms", "20000"], "broker.log")
    wait_until(lambda: call("GET", base + "/readyz")[0] == 200, 60, "the cluster ready")

    def search(q, k=10, mode="or", after=None):
        params = {"q": q, "k": k, "mode": mode, "syntax": "plain"}  # Cranfield's topics are prose
        if after is not None:
            params["after"] = after
        status, body = call("GET", base + "/search?" + urllib.parse.urlencode(params), timeout=30)
        if status != 200:
            fail("search %r: %d %s" % (q, status, body))
        return json.loads(body)

    def folded():
        status, body = call("GET", base + "/indexes/default")
        return json.loads(body)["folded_sequence"] if status == 200 else -1

    def indexer_metric(name):
        for line in call("GET", "http://127.0.0.1:%d/metrics" % metrics)[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return -1

    def served_everywhere(sequence):
        """Until a generation holding writes up to `sequence` is out and both leaves serve it (or a later one)."""
        wait_until(lambda: indexer_metric("warpsearch_indexer_folded_sequence") >= sequence, 90,
                   "writes up to %d folded into a generation" % sequence)
        generation = indexer_metric("warpsearch_indexer_generation")
        for port in leaf_http:
            wait_until(lambda: json.loads(call("GET", "http://127.0.0.1:%d/readyz" % port)[1]).get("generation", 0)
                       >= generation, 60, "leaf on :%d serving generation %d" % (port, generation))

    # A bulk request: bad lines answered with their reason, the others written in order.
    lines = [json.dumps({"id": "w%d" % i, "title": "written %d" % i, "body": "wunique%d aerofoil lift" % i})
             for i in range(300)]
    lines.insert(10, "this is not json")
    lines.insert(20, json.dumps({"id": "bad", "title": 5, "colour": "red"}))
    lines.insert(30, json.dumps({"id": "huge", "body": "x" * (1100 * 1024)}))
    lines.insert(40, json.dumps({"title": "no id"}))
    lines.insert(50, "")
    status, body = call("POST", base + "/indexes/default/documents", ("\n".join(lines) + "\n").encode())
    if status != 200:
        fail("bulk: %d %s" % (status, body[:500]))
    answer = json.loads(body)
    items = answer["items"]
    refused = {item["line"]: item for item in items if "error" in item}
    if sorted(refused) != [11, 21, 31, 41] or [refused[n]["status"] for n in sorted(refused)] != [400, 400, 413, 400]:
        fail("bulk: the refused lines %s" % json.dumps(refused)[:800])
    written = [item for item in items if "error" not in item]
    if len(written) != 300 or [i["sequence"] for i in written] != list(range(1, 301)) or not answer["errors"]:
        fail("bulk: the written lines' sequences %s" % [i.get("sequence") for i in written][:20])
    if {i["result"] for i in written} != {"created"}:
        fail("bulk: new documents not answered as created: %s" % {i["result"] for i in written})
    if call("POST", base + "/indexes/default/documents", b"\n\n")[0] != 400:
        fail("an empty bulk request was not refused")
    if call("POST", base + "/indexes/other/documents", b'{"id":"a"}\n')[0] != 404:
        fail("an unknown index was not refused")

    # Who may write: a token with the write scope; a search token gets 403, no token 401.
    one = json.dumps({"id": "w7", "body": "x"}).encode()
    if call("POST", base + "/indexes/default/documents", one, token=READER)[0] != 403:
        fail("a search token could write")
    if call("DELETE", base + "/indexes/default/documents/w7", token=None)[0] != 401:
        fail("a request without a token could delete")
    if call("GET", base + "/search?q=lift", token=READER)[0] != 200:
        fail("a search token could not search")

    # A replace, a delete of a written document and of an input one.
    status, body = call("PUT", base + "/indexes/default/documents/w0", json.dumps({"body": "wreplaced glider"}).encode())
    if status != 200 or json.loads(body)["sequence"] != 301 or json.loads(body)["result"] != "replaced":
        fail("PUT: %d %s" % (status, body))
    if call("PUT", base + "/indexes/default/documents/w0", json.dumps({"id": "other"}).encode())[0] != 400:
        fail("a PUT whose body names another id was not refused")
    for doc in ("w1", "1"):
        status, body = call("DELETE", base + "/indexes/default/documents/" + doc)
        if status != 200 or json.loads(body)["result"] != "deleted":
            fail("DELETE %s: %d %s" % (doc, status, body))
    status, body = call("DELETE", base + "/indexes/default/documents/w1")  # the second time: none left
    if status != 404 or json.loads(body)["result"] != "not_found" or json.loads(body)["sequence"] != 304:
        fail("DELETE of a deleted document: %d %s" % (status, body))
    if folded() < 0:
        fail("GET /indexes/default: %s" % (call("GET", base + "/indexes/default"),))
    # Read-your-writes: a search after the last write's sequence is answered once every partition
    # serves it, not before (the replace and both deletes in, at once).
    got = [x["id"] for x in search("wreplaced wunique1 wunique0", after=303)["hits"]]
    if got != ["w0"]:
        fail("a search with after=303 did not see the writes up to 303: %s" % got)
    served_everywhere(303)
    for q, expected in (("wunique5", ["w5"]), ("wunique299", ["w299"]), ("wunique1", []), ("wunique0", [])):
        got = [x["id"] for x in search(q)["hits"]]
        if got != expected:
            fail("search %s: %s, expected %s" % (q, got, expected))

    # Exact: the same answers as a fresh build of the same documents (Cranfield less document 1,
    # and the writes as they stand), documents and float scores.
    fresh_in = os.path.join(work, "fresh")
    os.makedirs(fresh_in)
    with open(os.path.join(fresh_in, "a.jsonl"), "w") as out:
        for line in open(os.path.join(data, "docs.jsonl")):
            if json.loads(line)["id"] != "1":
                out.write(line)
        for i in range(2, 300):
            out.write(json.dumps({"id": "w%d" % i, "title": "written %d" % i, "body": "wunique%d aerofoil lift" % i}) + "\n")
        out.write(json.dumps({"id": "w0", "body": "wreplaced glider"}) + "\n")
    subprocess.run([h.indexer, "build", "--input", fresh_in, "--out", os.path.join(work, "fresh-index"),
                    "--partitions", "1", "--quiet"], check=True, stderr=subprocess.DEVNULL)
    queries = [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(data, "queries.tsv"))][:40]
    queries.append(["w", "aerofoil lift written"])
    with open(os.path.join(work, "q.tsv"), "w") as f:
        for qid, text in queries:
            f.write("%s\t%s\n" % (qid, text))
    run = os.path.join(work, "fresh.run")
    subprocess.run([h.search, "--index", os.path.join(work, "fresh-index"), "--queries", os.path.join(work, "q.tsv"),
                    "-k", "10", "--run", run], check=True, stderr=subprocess.DEVNULL)
    expected = {}
    for line in open(run):
        qid, _, doc, _, score, _ = line.split()
        expected.setdefault(qid, []).append((doc, as_float32(float(score))))
    for qid, text in queries:
        got = [(x["id"], as_float32(x["score"])) for x in search(text)["hits"]]
        if got != expected.get(qid, []):
            fail("query %s %r: %s, a fresh build gives %s" % (qid, text, got[:3], expected.get(qid, [])[:3]))

    # kill -9 of the indexer in the middle of bulk loads: what was acknowledged stays, once.
    acknowledged, lock = {}, threading.Lock()

    def bulk_load(first_request, requests):
        for r in range(first_request, first_request + requests):
            body = "\n".join(json.dumps({"id": "k%d-%d" % (r, i), "body": "kunique%dx%d" % (r, i)}) for i in range(100))
            for _ in range(200):  # a client sends a request again until it is acknowledged
                try:
                    status, text = call("POST", base + "/indexes/default/documents", body.encode(), timeout=5)
                except OSError:
                    status = 0
                if status == 200:
                    with lock:
                        for item in json.loads(text)["items"]:
                            acknowledged[item["id"]] = item["sequence"]
                    break
                threading.Event().wait(0.05)
            else:
                fail("bulk request %d never acknowledged" % r)
    loader = threading.Thread(target=bulk_load, args=(0, 30))
    loader.start()
    wait_until(lambda: len(acknowledged) >= 800, 60, "bulk loads under way")
    indexer.send_signal(signal.SIGKILL)
    indexer.wait()
    killed_at = len(acknowledged)
    indexer = h.start(indexer_args, "indexer-restarted.log")
    loader.join(timeout=120)
    if loader.is_alive() or len(acknowledged) != 3000:
        fail("the bulk loads did not finish after the restart: %d of 3000 acknowledged" % len(acknowledged))
    served_everywhere(max(acknowledged.values()))
    for doc_id in sorted(acknowledged)[::7]:  # every 7th: several hundred searches
        r, i = doc_id[1:].split("-")
        got = [x["id"] for x in search("kunique%sx%s" % (r, i))["hits"]]
        if got != [doc_id]:
            fail("after kill -9 (%d acknowledged then): %s found as %s" % (killed_at, doc_id, got))
    log = open(os.path.join(work, "indexer-restarted.log")).read()
    print("writes_test: all checks passed (%d writes acknowledged before kill -9; restart: %s)"
          % (killed_at, [line for line in log.splitlines() if "taking writes" in line][:1]))
finally:
    h.cleanup()
