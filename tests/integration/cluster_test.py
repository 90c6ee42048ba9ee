#!/usr/bin/env python3
"""The running cluster through the real binaries on loopback: 2 partitions x 2 replicas on 4
warp-leaf processes and a warp-broker. Checks: the cluster's top-k equals a single-partition index
of the same documents, document for document and score for score, for every CISI request (long
natural-language paragraphs) and Cranfield query in every mode, over the leaves' direct search path and
over ZeroMQ alone; pages (offset) tile the ranking;
bad requests and unknown parameters get 400 with a JSON error and the broker keeps serving; every
/metrics output passes a Prometheus text-format parser; kill -9 of one replica under load fails no
request; both replicas of a partition down gives partial results within the deadline; a new
generation published by warp-indexer serve reaches leaves following it, and the broker's cache
stops serving the old results.
usage: cluster_test.py BUILD_DIR CRANFIELD_DIR CISI_DIR
WARP_LEAF_ARGS adds flags to every leaf (the GPU machine runs it with the GPU processor batching)."""
import json, os, random, re, shutil, signal, struct, subprocess, sys, threading, time, urllib.error, urllib.parse, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, http  # noqa: E402

build, data, cisi = sys.argv[1], sys.argv[2], sys.argv[3]
leaf_args = os.environ.get("WARP_LEAF_ARGS", "").split()
h = Harness(build, "warp-cluster-")
indexer, leaf, broker, search = h.indexer, h.leaf, h.broker, h.search
work, procs, next_port, start, fail, wait_until = h.work, h.procs, h.next_port, h.start, h.fail, h.wait_until


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


def as_float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def same_ranking(expected, actual, context):
    """One ranking (docs/architecture.md): the same documents in the same order with the same float scores."""
    if len(expected) != len(actual):
        fail("%s: %d hits, expected %d" % (context, len(actual), len(expected)))
    for rank, ((eid, escore), (aid, ascore)) in enumerate(zip(expected, actual)):
        if eid != aid or as_float32(escore) != as_float32(ascore):
            fail("%s rank %d: doc %s score %r, expected doc %s score %r" % (context, rank, aid, ascore, eid, escore))


def merged_flags(base, extra):
    """base's flags, then extra's; a flag in both takes extra's value (every leaf flag takes one)."""
    names, out, i = set(extra[::2]), [], 0
    while i < len(base):
        if base[i] in names:
            i += 2
            continue
        out.append(base[i])
        i += 1
    return out + list(extra)


def start_cluster(data_dir, tag, extra_leaf_args=()):
    """Indexes data_dir in 1 and in 2 partitions; 4 leaves (2 replicas a partition) and a broker over
    the 2-partition index. Returns the broker's URL, the leaves and the 1-partition index."""
    for parts in ("1", "2"):
        subprocess.run([indexer, "build", "--input", os.path.join(data_dir, "docs.jsonl"), "--out",
                        os.path.join(work, tag + "-index" + parts), "--partitions", parts, "--quiet"], check=True,
                       stderr=subprocess.DEVNULL)
    leaves = []
    for i in range(4):
        zmq_port, http_port, search_port = next_port(), next_port(), next_port()
        p = start([leaf, "--index", os.path.join(work, tag + "-index2"), "--partitions", str(i // 2), "--listen",
                   "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port, "--workers", "2",
                   "--search-listen", "127.0.0.1:%d" % search_port] + merged_flags(leaf_args, extra_leaf_args),
                  "%s-leaf%d.log" % (tag, i))
        leaves.append((p, zmq_port, http_port))
    broker_port = next_port()
    specs = ["%d=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (p, leaves[2 * p][1], leaves[2 * p + 1][1]) for p in (0, 1)]
    broker_proc = start([broker, "--partition", specs[0], "--partition", specs[1], "--listen", "127.0.0.1:%d" % broker_port,
                         "--timeout-ms", "1000"], tag + "-broker.log")
    base = "http://127.0.0.1:%d" % broker_port
    wait_until(lambda: http(base + "/readyz")[0] == 200, 20, "broker ready")
    for p, _, http_port in leaves:
        wait_until(lambda: http("http://127.0.0.1:%d/readyz" % http_port)[0] == 200, 10, "leaf ready")
    return base, leaves, broker_proc, os.path.join(work, tag + "-index1")


def single_partition_run(index1, queries, tag, mode, k, syntax="plain"):
    """warp-search's top k of each query on the 1-partition index: {qid: [(doc, score), ...]}."""
    qfile = os.path.join(work, tag + "-q.tsv")
    with open(qfile, "w") as f:
        for qid, text in queries:
            f.write("%s\t%s\n" % (qid, text))
    run = os.path.join(work, "%s-run.%s" % (tag, mode))
    subprocess.run([search, "--index", index1, "--queries", qfile, "--mode", mode, "-k", str(k), "--run", run,
                    "--syntax", syntax], check=True, stderr=subprocess.DEVNULL)
    ranking = {}
    for line in open(run):
        qid, _, doc, _, score, _ = line.split()
        ranking.setdefault(qid, []).append((doc, float(score)))
    return ranking


def compare_with_single_partition(base, index1, queries, tag, post=False):
    """Every query in every mode through the broker against warp-search on the 1-partition index."""
    for mode in ("and", "or", "andor"):
        expected = single_partition_run(index1, queries, tag, mode, 10)
        for qid, text in queries:
            # The topics are prose (CISI quotes words, Cranfield writes " -dash"): plain text.
            params = {"q": text, "k": 10, "mode": mode, "syntax": "plain"}
            if post:
                status, body = http(base + "/search", json.dumps(params).encode())
            else:
                status, body = http(base + "/search?" + urllib.parse.urlencode(params))
            if status != 200:
                fail("%s query %s: HTTP %d %s" % (tag, qid, status, body))
            answer = json.loads(body)
            if answer["partial"]:
                fail("%s query %s: partial answer %s" % (tag, qid, body))
            same_ranking(expected.get(qid, []), [(h["id"], h["score"]) for h in answer["hits"]],
                         "%s %s query %s" % (tag, mode, qid))


def read_queries(data_dir):
    return [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(data_dir, "queries.tsv"))]


try:
    # 1. CISI's 112 requests (up to 2 KB of prose, words repeated) through the whole cluster, by GET
    # and by POST, answered exactly as a single-partition index answers them.
    # Here every search with postings goes to a worker thread (--inline-max-postings 0); the Cranfield
    # cluster below answers its small queries on the leaves' front-end threads (the default).
    base, leaves, broker_proc, index1 = start_cluster(cisi, "cisi", ["--inline-max-postings", "0"])
    # The broker runs on the malloc its build chose: tcmalloc_minimal (WARP_BROKER_TCMALLOC), but
    # under the sanitizers (WARP_FUZZ), which bring their own.
    cache_path = os.path.join(build, "CMakeCache.txt")
    if not os.path.exists(cache_path):  # binaries run outside their build tree (the GPU machine)
        print("the broker's malloc not checked: no CMakeCache.txt in %s" % build)
    else:
        cache = open(cache_path).read()
        chosen = bool(re.search(r"^WARP_BROKER_TCMALLOC:BOOL=ON$", cache, re.M)) and not re.search(r"^WARP_FUZZ:BOOL=ON$", cache, re.M)
        if chosen != ("libtcmalloc_minimal" in open("/proc/%d/maps" % broker_proc.pid).read()):
            fail("the broker's malloc: tcmalloc_minimal %s by its build, but %s in the running process" %
                 ("chosen" if chosen else "not chosen", "absent" if chosen else "present"))
    cisi_queries = read_queries(cisi)
    if max(len(text) for _, text in cisi_queries) <= 1024:
        fail("CISI should hold requests longer than 1 KiB")
    compare_with_single_partition(base, index1, cisi_queries, "cisi")
    compare_with_single_partition(base, index1, cisi_queries[:20], "cisi-post", post=True)
    # A term said twice weighs more: the cache keeps the two queries apart.
    once = json.loads(http(base + "/search?q=retrieval+systems&k=3")[1])
    twice = json.loads(http(base + "/search?q=retrieval+systems+systems&k=3")[1])
    if twice["cached"] or twice["term_counts"] != [1, 2] or once["hits"][0]["score"] == twice["hits"][0]["score"]:
        fail("query-term frequency not counted: %s / %s" % (json.dumps(once), json.dumps(twice)))
    # More distinct terms than --max-terms (1,024): 400 naming the limit.
    many = " ".join("w%dx" % i for i in range(1100))
    status, body = http(base + "/search", json.dumps({"q": many}).encode())
    if status != 400 or "--max-terms" not in json.loads(body)["error"]:
        fail("a query of 1,100 distinct terms: expected 400 naming --max-terms, got %d %s" % (status, body))
    # 1,000 distinct terms are accepted and answered.
    status, body = http(base + "/search", json.dumps({"q": " ".join("w%dx" % i for i in range(999)) + " retrieval"}).encode())
    if status != 200 or not json.loads(body)["hits"]:
        fail("a query of 1,000 distinct terms: %d %s" % (status, body[:300]))
    def leaf_counter(http_port, name):
        text = http("http://127.0.0.1:%d/metrics" % http_port)[1]
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))

    searches = sum(leaf_counter(l[2], 'warpsearch_leaf_requests_total{kind="search"}') for l in leaves)
    inline = sum(leaf_counter(l[2], "warpsearch_leaf_answered_inline_total") for l in leaves)
    if searches < 300 or inline != 0:
        fail("with --inline-max-postings 0 the workers should answer: %d searches, %d inline" % (searches, inline))
    for p in [broker_proc] + [l[0] for l in leaves]:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        procs.remove(p)

    # 2. Cranfield: the same exact comparison, then the rest of the checks on this cluster.
    base, leaves, broker_proc, index1 = start_cluster(data, "cran")
    queries = read_queries(data)[:60]
    compare_with_single_partition(base, index1, queries, "cranfield")
    # The leaves offer the direct search path (--search-listen): the searches above went over it,
    # but for the first few of each broker loop while its links connected (how many depends on the
    # loops, one per two cores: on 32 cores 48 of 360 went over ZeroMQ). The next 60 queries (not
    # in the cache), the links up: these go direct. A broker told to keep to ZeroMQ answers the
    # same, exactly.
    def broker_requests(url, path):
        text = http(url + "/metrics")[1]
        return sum(float(l.split()[-1]) for l in text.splitlines()
                   if l.startswith('warpsearch_broker_leaf_requests_total{path="%s"}' % path))
    warm_direct, warm_zmq = broker_requests(base, "direct"), broker_requests(base, "zmq")
    compare_with_single_partition(base, index1, read_queries(data)[60:120], "cranfield, the links up")
    direct = broker_requests(base, "direct") - warm_direct
    over_zmq = broker_requests(base, "zmq") - warm_zmq
    if direct < 300 or over_zmq > direct / 20:
        fail("searches should take the direct path once its links are up: %d direct, %d over ZeroMQ (before: %d, %d)"
             % (direct, over_zmq, warm_direct, warm_zmq))
    zmq_port = next_port()
    start([broker, "--partition", "0=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (leaves[0][1], leaves[1][1]),
           "--partition", "1=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (leaves[2][1], leaves[3][1]),
           "--listen", "127.0.0.1:%d" % zmq_port, "--timeout-ms", "1000", "--search-path", "zmq"], "cran-zmq-broker.log")
    zmq_base = "http://127.0.0.1:%d" % zmq_port
    wait_until(lambda: http(zmq_base + "/readyz")[0] == 200, 20, "the ZeroMQ-only broker ready")
    compare_with_single_partition(zmq_base, index1, queries[:20], "cranfield-zmq")
    if broker_requests(zmq_base, "direct") != 0 or broker_requests(zmq_base, "zmq") < 100:
        fail("--search-path zmq should send every search over ZeroMQ")
    # Replicas named by host name: the broker resolves "localhost" for the direct path (it had kept
    # such replicas on ZeroMQ) and answers the same, exactly.
    named_port = next_port()
    start([broker, "--partition", "0=tcp://localhost:%d,tcp://localhost:%d" % (leaves[0][1], leaves[1][1]),
           "--partition", "1=tcp://localhost:%d,tcp://localhost:%d" % (leaves[2][1], leaves[3][1]),
           "--listen", "127.0.0.1:%d" % named_port, "--timeout-ms", "1000"], "cran-named-broker.log")
    named_base = "http://127.0.0.1:%d" % named_port
    wait_until(lambda: http(named_base + "/readyz")[0] == 200, 20, "the broker naming its leaves by host name")
    compare_with_single_partition(named_base, index1, queries[:10], "cranfield-named-warmup")
    compare_with_single_partition(named_base, index1, queries[:40], "cranfield-named")
    direct, over_zmq = broker_requests(named_base, "direct"), broker_requests(named_base, "zmq")
    if direct < 80:
        fail("replicas named by host name should take the direct path: %d direct, %d over ZeroMQ" % (direct, over_zmq))
    print("replicas named by host name: %d searches direct, %d over ZeroMQ" % (direct, over_zmq))
    gpu_leaves = sum(leaf_counter(l[2], "warpsearch_leaf_gpu_bytes_resident") for l in leaves) > 0
    if not gpu_leaves:
        if sum(leaf_counter(l[2], "warpsearch_leaf_answered_inline_total") for l in leaves) < 100:
            fail("Cranfield's small queries should be answered on the leaves' front-end threads")
    elif "gpu" not in leaf_args:  # --processor auto on a GPU machine: the scheduler, small searches inline
        scheduled = sum(leaf_counter(l[2], "warpsearch_leaf_scheduler_queries_total") for l in leaves)
        inline = sum(leaf_counter(l[2], "warpsearch_leaf_answered_inline_total") for l in leaves)
        if "--inline-max-postings" in leaf_args and leaf_args[leaf_args.index("--inline-max-postings") + 1] == "0":
            if scheduled < 100 or inline != 0:
                fail("GPU leaves on --processor auto, nothing inline: the scheduler answered %d searches, %d inline" % (scheduled, inline))
        elif inline < 50 or scheduled + inline < 100:
            fail("GPU leaves on --processor auto: Cranfield's small searches should be answered inline "
                 "(%d inline, %d by the scheduler)" % (inline, scheduled))
        print("scheduler: %d searches, %d on the GPU" % (scheduled, sum(
            leaf_counter(l[2], 'warpsearch_leaf_scheduler_queries_total{processor="gpu"') for l in leaves)))
        # A GPU that cannot take the generation (here a device this machine lacks): under auto the
        # leaf serves it on the CPU, says why once and counts it, rather than refusing it. Its
        # answers, beside a healthy leaf of partition 1 behind a second broker, stay exact.
        zmq_port, http_port = next_port(), next_port()
        start([leaf, "--index", os.path.join(work, "cran-index2"), "--partitions", "0", "--listen", "tcp://127.0.0.1:%d" % zmq_port,
               "--http", "127.0.0.1:%d" % http_port] + merged_flags(leaf_args, ["--gpu-devices", "7"]), "cran-gpu-fallback.log")
        wait_until(lambda: http("http://127.0.0.1:%d/readyz" % http_port)[0] == 200, 20, "the leaf whose GPU cannot load")
        if leaf_counter(http_port, "warpsearch_leaf_gpu_load_failures_total") != 1 or leaf_counter(http_port, "warpsearch_leaf_gpu_serving") != 0:
            fail("a GPU that cannot load the generation: expected warpsearch_leaf_gpu_load_failures_total 1 and _gpu_serving 0")
        if "the GPU cannot serve it" not in open(os.path.join(work, "cran-gpu-fallback.log")).read():
            fail("a GPU that cannot load the generation: no log line saying why")
        if leaf_counter(leaves[0][2], "warpsearch_leaf_gpu_serving") != 1:
            fail("a leaf whose GPU loaded the generation should report warpsearch_leaf_gpu_serving 1")
        fallback_port = next_port()
        start([broker, "--partition", "0=tcp://127.0.0.1:%d" % zmq_port, "--partition", "1=tcp://127.0.0.1:%d" % leaves[2][1],
               "--listen", "127.0.0.1:%d" % fallback_port, "--timeout-ms", "1000"], "cran-gpu-fallback-broker.log")
        fallback_base = "http://127.0.0.1:%d" % fallback_port
        wait_until(lambda: http(fallback_base + "/readyz")[0] == 200, 20, "the broker over the leaf whose GPU cannot load")
        compare_with_single_partition(fallback_base, index1, queries[:20], "cran-gpu-fallback")
        print("GPU unable to load the generation: served on the CPU, answers exact")
    status, body = http(base + "/search?" + urllib.parse.urlencode({"q": queries[0][1], "k": 10, "mode": "andor"}))
    if not json.loads(body)["cached"]:
        fail("a repeated query was not served from the cache")
    status, body = http(base + "/search", json.dumps({"q": queries[1][1], "k": 5}).encode())
    if status != 200 or len(json.loads(body)["hits"]) != 5:
        fail("POST /search: %d %s" % (status, body))

    # Pages: offset skips that many hits of the ranking. Page 2 of 10 is ranks 10-19 of the
    # single-partition index's top 20, by GET and by POST, and pages tile the ranking.
    page_queries = queries[20:30]
    top20 = single_partition_run(index1, page_queries, "pages", "or", 20)
    for qid, text in page_queries:
        pages = []
        for offset in (0, 10):
            status, body = http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10, "offset": offset}))
            answer = json.loads(body)
            if status != 200 or answer["offset"] != offset or answer["k"] != 10:
                fail("page at offset %d of query %s: %d %s" % (offset, qid, status, body[:300]))
            pages.append([(hit["id"], hit["score"]) for hit in answer["hits"]])
        same_ranking(top20.get(qid, [])[:10], pages[0], "page 1 of query %s" % qid)
        same_ranking(top20.get(qid, [])[10:20], pages[1], "page 2 of query %s" % qid)
        status, body = http(base + "/search", json.dumps({"q": text, "k": 5, "offset": 15}).encode())
        same_ranking(top20.get(qid, [])[15:20], [(hit["id"], hit["score"]) for hit in json.loads(body)["hits"]],
                     "POST page at offset 15 of query %s" % qid)
    if sum(len(hits) for hits in top20.values()) < 150:
        fail("the page queries should have 20 hits each, or nearly: %d" % sum(len(hits) for hits in top20.values()))
    # Past the last hit: an empty page, not an error.
    status, body = http(base + "/search?" + urllib.parse.urlencode({"q": "aeroplane", "k": 10, "offset": 990}))
    if status != 200 or json.loads(body)["hits"]:
        fail("a page past the last hit: expected 200 and no hits, got %d %s" % (status, body[:300]))
    # The mode in any case is the same query: the same cache entry, the mode named in lower case.
    status, body = http(base + "/search?" + urllib.parse.urlencode({"q": page_queries[0][1], "k": 10, "mode": "OR"}))
    answer = json.loads(body)
    if status != 200 or answer["mode"] != "or" or not answer["cached"]:
        fail("mode=OR should be or's query, answered from the cache: %d %s" % (status, body[:300]))

    # The query syntax: +required and -excluded words through the broker in every mode, as
    # warp-search --syntax query answers them on the 1-partition index (a constrained query never
    # shares a cache entry with its plain words: "wing lift" is asked first); every hit of
    # "+wing" holds wing, none of "-supersonic" holds supersonic. What it cannot take is a 400
    # naming the column.
    syntax_queries = [("s1", "wing lift"), ("s2", "+wing lift -supersonic"), ("s3", "heat -transfer -flux"),
                      ("s4", "+boundary +layer flow"), ("s5", "wing -heat-transfer"), ("s6", "+the wing"),
                      ("s7", queries[7][1])]  # Cranfield's "-dash", now excluded
    for mode in ("and", "or", "andor"):
        expected = single_partition_run(index1, syntax_queries, "syntax", mode, 10, syntax="query")
        for qid, text in syntax_queries:
            params = {"q": text, "k": 10, "mode": mode, "source": "true"}
            status, body = http(base + "/search?" + urllib.parse.urlencode(params))
            if status != 200:
                fail("syntax query %r: %d %s" % (text, status, body[:300]))
            hits = json.loads(body)["hits"]
            same_ranking(expected.get(qid, []), [(h["id"], h["score"]) for h in hits], "syntax %s %r" % (mode, text))
            for hit in hits:
                words = json.dumps(hit["source"]).lower()
                if ("+wing" in text and "wing" not in words) or ("-supersonic" in text and "supersonic" in words):
                    fail("syntax %r: hit %s breaks the constraint" % (text, hit["id"]))
    if expected.get("s1") == expected.get("s2") or not expected.get("s2"):
        fail("+wing lift -supersonic should rank differently from wing lift: %s" % expected.get("s2"))
    for q, says in (('lift "drag', "column 6"), ("title:wing", "field"), ("-wing -lift", "not excluded"),
                    ("wing +-lift", "column 6")):
        status, body = http(base + "/search?" + urllib.parse.urlencode({"q": q}))
        if status != 400 or says not in json.loads(body).get("error", ""):
            fail("syntax error %r: expected 400 saying %r, got %d %s" % (q, says, status, body[:300]))
    status, body = http(base + "/search?" + urllib.parse.urlencode({"q": 'lift "drag', "syntax": "plain"}))
    if status != 200 or not json.loads(body)["hits"]:
        fail("syntax=plain takes quotes as text: %d %s" % (status, body[:300]))
    print("query syntax: +required, -excluded and errors through the broker")

    # 3. Bad requests: 400 with a JSON error, and the broker keeps serving.
    bad = [("/search?k=10", None), ("/search?q=wing&k=0", None), ("/search?q=wing&k=abc", None),
           ("/search?q=wing&k=100000", None), ("/search?q=wing&mode=xor", None), ("/search?q=%FF%FE", None),
           ("/search?q=%ZZ", None), ("/search?q=" + "x" * 2000, None), ("/search?q=" + "y" * 17000, None),
           ("/search", b"{not json"), ("/search", b'{"q": 7}'), ("/search", b'{"q": "wing", "k": "ten"}'),
           ("/search", b'{"q": "' + b"z" * 17000 + b'"}'), ("/search", b'{"q": "' + b"z" * 200000 + b'"}'), ("/search?q=%21%21%21", None),
           # Unknown parameters are refused, not ignored (a misspelt offset would return page 1).
           ("/search?q=wing&size=5", None), ("/search?q=wing&offest=10", None), ("/search", b'{"q": "wing", "from": 10}'),
           ("/search?q=wing&offset=-1", None), ("/search?q=wing&offset=x", None), ("/search?q=wing&k=10&offset=991", None),
           ("/search", b'{"q": "wing", "offset": 1.5}'), ("/search", b'{"q": "wing", "k": 600, "offset": 500}')]
    for path, body in bad:
        status, text = http(base + path, body)
        if status != 400:
            fail("%s: expected 400, got %d %s" % (path[:60], status, text[:200]))
        if "error" not in json.loads(text):
            fail("%s: no JSON error" % path[:60])
        if ("size" in path or "offest" in path or b"from" in (body or b"")) and "accepted: q, k, offset, mode" not in text:
            fail("%s: the error should name the parameters accepted: %s" % (path[:60], text[:200]))
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
    wait_until(lambda: answered[0] >= 20, 20, "load before the kill")  # states, never fixed sleeps
    leaves[0][0].send_signal(signal.SIGKILL)
    after_kill = answered[0]
    wait_until(lambda: answered[0] >= after_kill + 60, 30, "load after the kill")
    stop.set()
    for t in threads:
        t.join()
    if errors:
        fail("%d of %d requests failed after kill -9 of one replica: %s" % (len(errors), answered[0], errors[:2]))
    if answered[0] < 20:
        fail("too little load: %d requests" % answered[0])

    # 6. Both replicas of partition 0 down: partial results, within the deadline.
    leaves[1][0].send_signal(signal.SIGKILL)

    def partition0_down():
        state = json.loads(http(base + "/cluster")[1])
        return not [p for p in state["partitions"] if p["partition"] == 0][0]["healthy"]

    wait_until(partition0_down, 10, "the broker to see partition 0 down")
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
    sign, check = h.signing_flags()
    # A follower checks whose generations it takes: with neither a key nor --unsigned-generations it
    # does not start, and says what it needs.
    unkeyed = subprocess.run([leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--root", os.path.join(work, "unkeyed"),
                              "--http", "127.0.0.1:%d" % next_port()], capture_output=True, text=True, timeout=30)
    if unkeyed.returncode == 0 or "--generation-key" not in unkeyed.stderr:
        h.fail("a follower without a generation key started, or did not say why not: " + unkeyed.stderr)
    start([indexer, "serve", "--input", inputs, "--root", os.path.join(work, "published"), "--partitions", "2",
           "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch", "tcp://127.0.0.1:%d" % fetch, "--rescan", "1"] + sign,
          "indexer.log")
    endpoints, follower_http = [], []
    for i in range(2):
        zmq_port, http_port = next_port(), next_port()
        # Follower 1 frees the GPU before it loads a new generation there (on a GPU machine).
        start([leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--root", os.path.join(work, "leaf%d" % i), "--partitions",
               str(i), "--listen", "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port]
              + (["--gpu-generations", "1"] if i == 1 else []) + check, "follower%d.log" % i)
        endpoints.append(zmq_port)
        follower_http.append(http_port)
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
    after_swap = answered[0]
    wait_until(lambda: answered[0] >= after_swap + 20, 20, "load after the swap")
    stop.set()
    for t in threads:
        t.join()
    if errors:
        fail("%d of %d requests failed during the generation swap: %s" % (len(errors), answered[0], errors[:2]))
    if gpu_leaves:
        # --gpu-generations 1: generation 2 served on the CPU until generation 1 let the GPU go, then
        # on the GPU again, and not counted as a GPU that could not load it.
        wait_until(lambda: leaf_counter(follower_http[1], "warpsearch_leaf_gpu_serving") == 1
                   and leaf_counter(follower_http[1], "warpsearch_leaf_generation") == 2, 40, "follower 1 on the GPU with generation 2")
        log1 = open(os.path.join(work, "follower1.log")).read()
        if "generation 2 on the CPU until generation 1 frees the GPU" not in log1:
            fail("--gpu-generations 1: no line saying generation 2 waited on the CPU for the GPU:\n" + log1[-2000:])
        if "still holds the GPU" in log1:  # released once its queries ended, not after the 30 s bound
            fail("--gpu-generations 1: generation 1 was never released:\n" + log1[-2000:])
        if leaf_counter(follower_http[1], "warpsearch_leaf_gpu_load_failures_total") != 0:
            fail("--gpu-generations 1: a generation loaded after the GPU was freed counted as a GPU failure")
        if "on the CPU until" in open(os.path.join(work, "follower0.log")).read():
            fail("the default (--gpu-generations 2) should load generation 2 beside generation 1 on this GPU")
        print("--gpu-generations 1: generation 2 on the CPU until generation 1 freed the GPU, then on the GPU: "
              + " | ".join(l for l in log1.splitlines() if "generation 2" in l))
    print("cluster_test: all checks passed")
finally:
    h.cleanup()
