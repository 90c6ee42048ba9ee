#!/usr/bin/env python3
"""The running cluster through the real binaries on loopback: 2 partitions x 2 replicas on 4
warp-leaf processes and a warp-broker. Checks: the cluster's top-k equals a single-partition index
of the same documents; bad requests get 400 with a JSON error and the broker keeps serving; every
/metrics output passes a Prometheus text-format parser; kill -9 of one replica under load fails no
request; both replicas of a partition down gives partial results within the deadline; a new
generation published by warp-indexer serve reaches leaves following it, and the broker's cache
stops serving the old results.
usage: cluster_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, random, re, shutil, signal, subprocess, sys, tempfile, threading, time, urllib.error, urllib.parse, urllib.request

build, data = sys.argv[1], sys.argv[2]
indexer, leaf, broker, search = (os.path.join(build, p) for p in
                                 ("indexer/warp-indexer", "leaf/warp-leaf", "broker/warp-broker", "leaf/warp-search"))
work = tempfile.mkdtemp(prefix="warp-cluster-")
procs = []
# Below the ephemeral range (32768+), apart from indexer_service_test (20000-25999).
port = random.randint(26000, 31000)


def next_port():
    global port
    port += 1
    return port


def start(args, log):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, log), "w"))
    procs.append(p)
    return p


def fail(message):
    print("FAIL:", message, file=sys.stderr)
    for name in sorted(os.listdir(work)):
        if name.endswith(".log"):
            print("==", name, file=sys.stderr)
            print(open(os.path.join(work, name)).read()[-3000:], file=sys.stderr)
    raise SystemExit(1)


def http(url, body=None, timeout=5):
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_until(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.1)
    fail("timed out waiting for " + what)


METRIC_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?([0-9.eE+-]+|NaN|\+Inf|-Inf)( [0-9]+)?$')


def check_metrics(text, prefix):
    names = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            if line.startswith("# TYPE") and len(line.split()) != 4:
                fail("bad TYPE line: " + line)
            continue
        if not METRIC_LINE.match(line):
            fail("not Prometheus text format: " + line)
        names.add(line.split("{")[0].split(" ")[0])
    if not any(n.startswith(prefix) for n in names):
        fail("no %s metrics in %s" % (prefix, sorted(names)[:5]))
    return names


def same_ranking(expected, actual, context):
    if len(expected) != len(actual):
        fail("%s: %d hits, expected %d" % (context, len(actual), len(expected)))
    for rank, ((eid, escore), (aid, ascore)) in enumerate(zip(expected, actual)):
        if abs(escore - ascore) > 1e-4 * max(1.0, abs(escore)):
            fail("%s rank %d: score %f, expected %f" % (context, rank, ascore, escore))
        if eid != aid and abs(escore - ascore) > 1e-6 * max(1.0, escore):
            fail("%s rank %d: doc %s, expected %s" % (context, rank, aid, eid))


try:
    # 1. Indexes: the same documents in 2 partitions and in 1.
    for parts in ("1", "2"):
        subprocess.run([indexer, "build", "--input", os.path.join(data, "docs.jsonl"), "--out",
                        os.path.join(work, "index" + parts), "--partitions", parts, "--quiet"], check=True,
                       stderr=subprocess.DEVNULL)
    leaves = []
    for i in range(4):
        zmq_port, http_port = next_port(), next_port()
        p = start([leaf, "--index", os.path.join(work, "index2"), "--partitions", str(i // 2), "--listen",
                   "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port, "--workers", "2"], "leaf%d.log" % i)
        leaves.append((p, zmq_port, http_port))
    broker_port = next_port()
    specs = ["%d=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (p, leaves[2 * p][1], leaves[2 * p + 1][1]) for p in (0, 1)]
    start([broker, "--partition", specs[0], "--partition", specs[1], "--listen", "127.0.0.1:%d" % broker_port,
           "--timeout-ms", "1000"], "broker.log")
    base = "http://127.0.0.1:%d" % broker_port
    wait_until(lambda: http(base + "/readyz")[0] == 200, 20, "broker ready")
    for p, _, http_port in leaves:
        wait_until(lambda: http("http://127.0.0.1:%d/readyz" % http_port)[0] == 200, 10, "leaf ready")

    # 2. The cluster answers like a single-partition index.
    queries = [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(data, "queries.tsv"))][:60]
    qfile = os.path.join(work, "q.tsv")
    with open(qfile, "w") as f:
        for qid, text in queries:
            f.write("%s\t%s\n" % (qid, text))
    for mode in ("and", "or", "andor"):
        run = os.path.join(work, "run." + mode)
        subprocess.run([search, "--index", os.path.join(work, "index1"), "--queries", qfile, "--mode", mode, "-k", "10",
                        "--run", run], check=True, stderr=subprocess.DEVNULL)
        expected = {}
        for line in open(run):
            qid, _, doc, _, score, _ = line.split()
            expected.setdefault(qid, []).append((doc, float(score)))
        for qid, text in queries:
            status, body = http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10, "mode": mode}))
            if status != 200:
                fail("query %s: HTTP %d %s" % (qid, status, body))
            answer = json.loads(body)
            if answer["partial"]:
                fail("query %s: partial answer %s" % (qid, body))
            same_ranking(expected.get(qid, []), [(h["id"], h["score"]) for h in answer["hits"]], "%s query %s" % (mode, qid))
    status, body = http(base + "/search?" + urllib.parse.urlencode({"q": queries[0][1], "k": 10, "mode": "andor"}))
    if not json.loads(body)["cached"]:
        fail("a repeated query was not served from the cache")
    status, body = http(base + "/search", json.dumps({"q": queries[1][1], "k": 5}).encode())
    if status != 200 or len(json.loads(body)["hits"]) != 5:
        fail("POST /search: %d %s" % (status, body))

    # 3. Bad requests: 400 with a JSON error, and the broker keeps serving.
    bad = [("/search?k=10", None), ("/search?q=wing&k=0", None), ("/search?q=wing&k=abc", None),
           ("/search?q=wing&k=100000", None), ("/search?q=wing&mode=xor", None), ("/search?q=%FF%FE", None),
           ("/search?q=%ZZ", None), ("/search?q=" + "x" * 2000, None), ("/search?q=" + "y" * 20000, None),
           ("/search", b"{not json"), ("/search", b'{"q": 7}'), ("/search", b'{"q": "wing", "k": "ten"}'),
           ("/search", b'{"q": "' + b"z" * 70000 + b'"}'), ("/search?q=%21%21%21", None)]
    for path, body in bad:
        status, text = http(base + path, body)
        if status != 400:
            fail("%s: expected 400, got %d %s" % (path[:60], status, text[:200]))
        if "error" not in json.loads(text):
            fail("%s: no JSON error" % path[:60])
    if http(base + "/search?q=wing")[0] != 200:
        fail("the broker stopped serving after bad requests")

    # 4. Metrics of every service parse as Prometheus text format.
    names = check_metrics(http(base + "/metrics")[1], "warpsearch_broker_")
    for needed in ("warpsearch_broker_requests_total", "warpsearch_broker_cache_hits_total", "warpsearch_broker_request_seconds_bucket"):
        if needed not in names:
            fail("missing metric " + needed)
    for _, _, http_port in leaves:
        leaf_names = check_metrics(http("http://127.0.0.1:%d/metrics" % http_port)[1], "warpsearch_leaf_")
        for needed in ("warpsearch_leaf_query_seconds_bucket", "warpsearch_leaf_gpu_bytes_resident",
                       "warpsearch_leaf_gpu_list_cache_hits_total", "warpsearch_leaf_gpu_list_cache_misses_total"):
            if needed not in leaf_names:
                fail("missing leaf metric " + needed)
    status, cluster = http(base + "/cluster")
    if status != 200 or len(json.loads(cluster)["partitions"]) != 2:
        fail("/cluster: " + cluster)

    # 5. kill -9 of one replica under load: no failed or partial request.
    errors, answered = [], [0]
    stop = threading.Event()

    def load(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            text = queries[rng.randrange(len(queries))][1] + " " + str(rng.randrange(10 ** 6))  # uncached
            status, body = http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10}))
            if status != 200 or json.loads(body)["partial"]:
                errors.append((status, body[:300]))
            answered[0] += 1

    threads = [threading.Thread(target=load, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    leaves[0][0].send_signal(signal.SIGKILL)
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join()
    if errors:
        fail("%d of %d requests failed after kill -9 of one replica: %s" % (len(errors), answered[0], errors[:2]))
    if answered[0] < 20:
        fail("too little load: %d requests" % answered[0])

    # 6. Both replicas of partition 0 down: partial results, within the deadline.
    leaves[1][0].send_signal(signal.SIGKILL)
    time.sleep(1.5)
    started = time.time()
    status, body = http(base + "/search?q=shock+wave+interaction&k=10")
    elapsed = time.time() - started
    answer = json.loads(body)
    if status != 200 or not answer["partial"]:
        fail("expected a partial answer: %d %s" % (status, body))
    down = [p for p in answer["partitions"] if p["partition"] == 0][0]
    up = [p for p in answer["partitions"] if p["partition"] == 1][0]
    if down["status"] == "ok" or up["status"] != "ok" or not answer["hits"]:
        fail("partition statuses wrong: " + body)
    if elapsed > 1.5:
        fail("partial answer took %.2f s, deadline 1 s" % elapsed)
    if http(base + "/readyz")[0] != 503:
        fail("/readyz should report 503 with a partition down")

    # 7. A new generation reaches the leaves and the cache stops serving the old results.
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=10)
    procs.clear()
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    shutil.copy(os.path.join(data, "docs.jsonl"), os.path.join(inputs, "cran.jsonl"))
    pub, fetch = next_port(), next_port()
    start([indexer, "serve", "--input", inputs, "--root", os.path.join(work, "published"), "--partitions", "2",
           "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch", "tcp://127.0.0.1:%d" % fetch, "--rescan", "1"], "indexer.log")
    endpoints = []
    for i in range(2):
        zmq_port, http_port = next_port(), next_port()
        start([leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--root", os.path.join(work, "leaf%d" % i), "--partitions",
               str(i), "--listen", "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port], "follower%d.log" % i)
        endpoints.append(zmq_port)
    broker_port = next_port()
    base = "http://127.0.0.1:%d" % broker_port
    start([broker, "--partition", "0=tcp://127.0.0.1:%d" % endpoints[0], "--partition", "1=tcp://127.0.0.1:%d" % endpoints[1],
           "--listen", "127.0.0.1:%d" % broker_port], "broker2.log")
    wait_until(lambda: http(base + "/readyz")[0] == 200, 30, "the following cluster to be ready")
    query = base + "/search?q=zeppelin+airship&k=5"
    first = json.loads(http(query)[1])
    if first["hits"] or json.loads(http(query)[1])["cached"] is not True:
        fail("generation 1 should have no zeppelin and cache the answer: " + json.dumps(first))
    # Queries keep flowing while the leaves swap generations: none may fail or come back partial.
    errors, answered = [], [0]
    stop = threading.Event()
    threads = [threading.Thread(target=load, args=(100 + s,)) for s in range(2)]
    for t in threads:
        t.start()
    with open(os.path.join(inputs, "more.jsonl"), "w") as f:
        f.write(json.dumps({"id": "zep-1", "title": "zeppelin", "body": "a rigid airship of the twenties"}) + "\n")

    def new_results():
        answer = json.loads(http(query)[1])
        return any(h["id"] == "zep-1" for h in answer["hits"]) and not answer["cached"]

    wait_until(new_results, 40, "the new generation's document through the broker")
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    if errors:
        fail("%d of %d requests failed during the generation swap: %s" % (len(errors), answered[0], errors[:2]))
    print("cluster_test: all checks passed")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()
    shutil.rmtree(work, ignore_errors=True)
