#!/usr/bin/env python3
"""Writes searched before any generation holds them (the near-real-time path, docs/writes.md), with
the real binaries on loopback: warp-indexer serve with --write and --tail over Cranfield and a fold
interval of an hour (no generation is built from the writes during the test), two leaves following
it with --tail (one per partition), a broker with --indexer. Bulk puts, a replace and deletes (of a
written document and of an input one) are searchable with after= while the indexer still serves
generation 1; the answers then equal, documents and float scores, warp-search over a fresh build of
the same documents; a leaf killed with -9 and started again serves the writes again from its
generation and the tail; the indexer killed with -9 and started again goes on with the same
statistics (more writes, the answers still those of a fresh build). WARP_LEAF_ARGS adds flags to
the leaves (the GPU host runs it with --processor gpu and auto; the test command also with the
scheduler over a CPU processor in the GPU's place, --scheduler-cpu-as-gpu); with --processor gpu,
the leaves must have answered the writes' searches on the GPU (the generation's lists under the
overlay), with --scheduler-cpu-as-gpu the scheduler some on its stand-in.
usage: live_search_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, shutil, signal, subprocess, sys, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, as_float32, http_method  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-live-")
work, fail, wait_until, next_port = h.work, h.fail, h.wait_until, h.next_port
TOKEN = "writer-token-1"


def call(method, url, body=None, timeout=10):
    return http_method(method, url, body, timeout, TOKEN)


try:
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    shutil.copy(os.path.join(data, "docs.jsonl"), os.path.join(inputs, "cran.jsonl"))
    sign, check = h.signing_flags()
    pub, fetch, write, tail, metrics = next_port(), next_port(), next_port(), next_port(), next_port()
    indexer_args = [h.indexer, "serve", "--input", inputs, "--root", os.path.join(work, "root"), "--partitions", "2",
                    "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch", "tcp://127.0.0.1:%d" % fetch,
                    "--write", "tcp://127.0.0.1:%d" % write, "--tail", "tcp://127.0.0.1:%d" % tail,
                    "--rescan", "1", "--fold-interval-ms", "3600000", "--metrics", "127.0.0.1:%d" % metrics] + sign
    indexer = h.start(indexer_args, "indexer.log")
    leaf_args, leaves, leaf_http, leaf_procs = [], [], [], []
    for p in (0, 1):
        zmq_port, http_port = next_port(), next_port()
        leaf_args.append([h.leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--tail", "tcp://127.0.0.1:%d" % tail,
                          "--root", os.path.join(work, "leaf%d" % p), "--partitions", str(p), "--listen",
                          "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port, "--workers", "2"] + check
                         + os.environ.get("WARP_LEAF_ARGS", "").split())
        leaf_procs.append(h.start(leaf_args[-1], "leaf%d.log" % p))
        leaves.append(zmq_port)
        leaf_http.append(http_port)
    broker_port = next_port()
    base = "http://127.0.0.1:%d" % broker_port
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write("%s read,write\n" % TOKEN)
    os.chmod(tokens, 0o600)
    h.start([h.broker, "--listen", "127.0.0.1:%d" % broker_port, "--partition", "0=tcp://127.0.0.1:%d" % leaves[0],
             "--partition", "1=tcp://127.0.0.1:%d" % leaves[1], "--indexer", "tcp://127.0.0.1:%d" % write,
             "--write-timeout-ms", "3000", "--cache-ttl-s", "0", "--auth-tokens", tokens, "--after-wait-ms", "20000"],
            "broker.log")
    wait_until(lambda: call("GET", base + "/readyz")[0] == 200, 60, "the cluster ready")

    def search(q, k=10, mode="or", after=None):
        params = {"q": q, "k": k, "mode": mode, "syntax": "plain"}  # Cranfield's topics are prose
        if after is not None:
            params["after"] = after
        status, body = call("GET", base + "/search?" + urllib.parse.urlencode(params), timeout=30)
        if status != 200:
            fail("search %r: %d %s" % (q, status, body))
        return json.loads(body)

    def generation():
        status, body = call("GET", base + "/indexes/default")
        return json.loads(body) if status == 200 else {}

    def write_docs(docs):
        body = "\n".join(json.dumps(d) for d in docs) + "\n"
        status, text = call("POST", base + "/indexes/default/documents", body.encode())
        if status != 200:
            fail("bulk: %d %s" % (status, text[:300]))
        return max(item["sequence"] for item in json.loads(text)["items"])

    # Bulk puts, searchable at once (read-your-writes), with no generation built from them.
    docs = [{"id": "w%d" % i, "title": "written %d" % i, "body": "wunique%d aerofoil lift" % i} for i in range(200)]
    start = time.monotonic()
    last = write_docs(docs)
    got = [x["id"] for x in search("wunique137", after=last)["hits"]]
    visible_ms = (time.monotonic() - start) * 1000
    if got != ["w137"]:
        fail("a written document was not found with after=%d: %s" % (last, got))
    status = generation()
    if status.get("folded_sequence", -1) != 0:
        fail("a generation was built from the writes (the test means to search them before): %s" % status)

    # A replace, a delete of a written document and of an input one.
    call("PUT", base + "/indexes/default/documents/w0", json.dumps({"body": "wreplaced glider"}).encode())
    call("DELETE", base + "/indexes/default/documents/w1")
    status, body = call("DELETE", base + "/indexes/default/documents/1")
    last = json.loads(body)["sequence"]
    for q, expected in (("wreplaced wunique0", ["w0"]), ("wunique1", []), ("wunique5", ["w5"])):
        got = [x["id"] for x in search(q, after=last)["hits"]]
        if got != expected:
            fail("search %s after the replace and deletes: %s, expected %s" % (q, got, expected))

    queries = [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(data, "queries.tsv"))][:40]
    queries.append(["w", "aerofoil lift written"])
    with open(os.path.join(work, "q.tsv"), "w") as f:
        for qid, text in queries:
            f.write("%s\t%s\n" % (qid, text))

    def compare_with_fresh_build(written, deleted, label):
        """The broker's answers against warp-search over a fresh build: Cranfield less `deleted`,
        then `written` (id → document, in the order of their last write)."""
        fresh_in = os.path.join(work, "fresh-" + label)
        os.makedirs(fresh_in)
        with open(os.path.join(fresh_in, "a.jsonl"), "w") as out:
            for line in open(os.path.join(data, "docs.jsonl")):
                if json.loads(line)["id"] not in deleted:
                    out.write(line)
            for doc in written.values():
                out.write(json.dumps(doc) + "\n")
        subprocess.run([h.indexer, "build", "--input", fresh_in, "--out", os.path.join(work, "index-" + label),
                        "--partitions", "1", "--quiet"], check=True, stderr=subprocess.DEVNULL)
        run = os.path.join(work, label + ".run")
        subprocess.run([h.search, "--index", os.path.join(work, "index-" + label), "--queries",
                        os.path.join(work, "q.tsv"), "-k", "10", "--run", run], check=True, stderr=subprocess.DEVNULL)
        expected = {}
        for line in open(run):
            qid, _, doc, _, score, _ = line.split()
            expected.setdefault(qid, []).append((doc, as_float32(float(score))))
        for qid, text in queries:
            # A partial answer (a restarted leaf not yet back in the broker's view) is asked again.
            answer = search(text)
            for _ in range(100):
                if not answer["partial"]:
                    break
                time.sleep(0.1)
                answer = search(text)
            else:
                fail("%s: query %s answered in part for 10 s: %s" % (label, qid, answer["partitions"]))
            got = [(x["id"], as_float32(x["score"])) for x in answer["hits"]]
            if got != expected.get(qid, []):
                first = next((i for i, (a, b) in enumerate(zip(got, expected.get(qid, []))) if a != b), min(len(got), len(expected.get(qid, []))))
                fail("%s: query %s %r: from rank %d %s, a fresh build gives %s" % (label, qid, text, first + 1, got[first:first + 3],
                                                                      expected.get(qid, [])[first:first + 3]))

    written = {d["id"]: d for d in docs[2:]}
    written["w0"] = {"id": "w0", "body": "wreplaced glider"}
    compare_with_fresh_build(written, {"1"}, "live")

    def leaf_metric(port, prefix):
        """The sum of a leaf's samples whose line starts with `prefix`."""
        lines = call("GET", "http://127.0.0.1:%d/metrics" % port)[1].splitlines()
        return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))

    if "--scheduler-cpu-as-gpu" in os.environ.get("WARP_LEAF_ARGS", ""):
        # The scheduler sent writes' searches to its stand-in GPU processor (batches started on the
        # generation under the overlay, the segments merged when taken).
        batched = sum(leaf_metric(port, 'warpsearch_leaf_scheduler_queries_total{processor="gpu"') for port in leaf_http)
        if batched == 0:
            fail("the leaves' scheduler answered none of the writes' searches on its GPU processor")
    if "--processor gpu" in os.environ.get("WARP_LEAF_ARGS", ""):
        for port in leaf_http:  # the writes held, the GPU still serving: on the GPU under the overlay
            serving = leaf_metric(port, "warpsearch_leaf_gpu_serving")
            on_gpu = leaf_metric(port, 'warpsearch_leaf_query_seconds_count{processor="gpu"}')
            if serving != 1 or on_gpu == 0:
                fail("leaf :%d with writes held: gpu_serving %s, %d searches on the GPU" % (port, serving, on_gpu))

    # A leaf killed with -9 comes back with the writes: its generation from disk, the rest by the tail.
    leaf_procs[1].send_signal(signal.SIGKILL)
    leaf_procs[1].wait()
    leaf_procs[1] = h.start(leaf_args[1], "leaf1-restarted.log")
    wait_until(lambda: json.loads(call("GET", "http://127.0.0.1:%d/readyz" % leaf_http[1])[1] or "{}")
               .get("write_sequence", 0) >= last, 60, "the restarted leaf serving the writes")
    wait_until(lambda: call("GET", base + "/readyz")[0] == 200 and not search("lift", after=last)["partial"], 60,
               "the broker searching the restarted leaf")
    compare_with_fresh_build(written, {"1"}, "leaf-restarted")

    # The indexer killed with -9: started again, its statistics from the generation and the log; more
    # writes (a replace of an input document among them) searched with them.
    indexer.send_signal(signal.SIGKILL)
    indexer.wait()
    indexer = h.start(indexer_args, "indexer-restarted.log")
    more = [{"id": "m%d" % i, "title": "more", "body": "munique%d lift drag" % i} for i in range(50)]
    more.append({"id": "2", "title": "replaced input", "body": "wreplaced input two"})
    for _ in range(100):  # until the restarted indexer takes writes
        status, text = call("POST", base + "/indexes/default/documents",
                            ("\n".join(json.dumps(d) for d in more) + "\n").encode())
        if status == 200:
            break
        time.sleep(0.2)
    else:
        fail("the restarted indexer took no writes")
    last = max(item["sequence"] for item in json.loads(text)["items"])
    got = [x["id"] for x in search("munique7", after=last)["hits"]]
    if got != ["m7"]:
        fail("after the indexer's restart: munique7 found as %s" % got)
    written.update({d["id"]: d for d in more})
    compare_with_fresh_build(written, {"1"}, "indexer-restarted")
    print("live_search_test: all checks passed (200 writes searchable in %.0f ms with after=, no generation built)"
          % visible_ms)
finally:
    h.cleanup()
