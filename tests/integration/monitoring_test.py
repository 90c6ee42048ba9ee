#!/usr/bin/env python3
"""Dashboards and alert rules against a real Prometheus (Debian's `prometheus`, started here):
`promtool check rules` and `check config`; then a local cluster (warp-indexer serve, 4 following
leaves in 2 partitions x 2 replicas whose scheduler runs with a CPU processor in the GPU's place,
--scheduler-cpu-as-gpu, the broker) scraped every second under a query load with some bad
requests; the scheduler must have answered on both processors. Every query of every panel of k8s/components/monitoring/dashboards/*.json (variables set to
match all) and the signal of every alert (its expression without the final comparison) must return
data through Prometheus' HTTP API. Then both replicas of partition 1 stop, and
WarpsearchPartitionWithoutReadyReplica must fire for partition 1.
usage: monitoring_test.py BUILD_DIR CRANFIELD_DIR SOURCE_DIR"""
import glob, json, os, random, re, shutil, signal, subprocess, sys, threading, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, http  # noqa: E402

build, data, source = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
h = Harness(build, "warp-monitoring-")
work, fail, wait_until, next_port = h.work, h.fail, h.wait_until, h.next_port
rules = os.path.join(source, "k8s/components/monitoring/warpsearch.rules.yml")
try:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        fail("prometheus and promtool are missing (deploy/install-deps.sh installs the Debian package prometheus)")
    checked = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
    if checked.returncode != 0:
        fail("promtool check rules: " + checked.stdout + checked.stderr)

    # The cluster, following the indexer.
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    shutil.copy(os.path.join(data, "docs.jsonl"), os.path.join(inputs, "cran.jsonl"))
    pub, fetch, indexer_metrics, tail = next_port(), next_port(), next_port(), next_port()
    sign, check = h.signing_flags()
    h.start([h.indexer, "serve", "--input", inputs, "--root", os.path.join(work, "published"), "--partitions", "2",
             "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch", "tcp://127.0.0.1:%d" % fetch,
             "--metrics", "127.0.0.1:%d" % indexer_metrics, "--rescan", "1", "--write", "tcp://127.0.0.1:%d" % next_port(),
             "--tail", "tcp://127.0.0.1:%d" % tail]
            + sign, "indexer.log")
    leaves = []
    for i in range(4):
        zmq_port, http_port = next_port(), next_port()
        proc = h.start([h.leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--tail", "tcp://127.0.0.1:%d" % tail,
                        "--root", os.path.join(work, "leaf%d" % i), "--scheduler-cpu-as-gpu", "--inline-max-postings", "0",
                        "--partitions", str(i // 2), "--listen", "tcp://127.0.0.1:%d" % zmq_port, "--http",
                        "127.0.0.1:%d" % http_port, "--workers", "2"] + check, "leaf%d.log" % i)
        leaves.append((proc, zmq_port, http_port))
    broker_port, admin_port = next_port(), next_port()
    base = "http://127.0.0.1:%d" % broker_port
    h.start([h.broker, "--partition", "0=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (leaves[0][1], leaves[1][1]),
             "--partition", "1=tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (leaves[2][1], leaves[3][1]),
             "--listen", "127.0.0.1:%d" % broker_port, "--admin-listen", "127.0.0.1:%d" % admin_port,
             "--timeout-ms", "500"], "broker.log")
    wait_until(lambda: http("http://127.0.0.1:%d/readyz" % admin_port)[0] == 200, 60, "the cluster ready")

    # Prometheus scraping every service each second and evaluating the rules each second.
    config = os.path.join(work, "prometheus.yml")
    targets = lambda ports: json.dumps(["127.0.0.1:%d" % p for p in ports])
    with open(config, "w") as f:
        f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%s]\nscrape_configs:\n" % json.dumps(rules))
        f.write("  - {job_name: warpsearch-broker, static_configs: [{targets: %s}]}\n" % targets([admin_port]))
        f.write("  - {job_name: warpsearch-leaf, static_configs: [{targets: %s}]}\n" % targets([l[2] for l in leaves]))
        f.write("  - {job_name: warpsearch-indexer, static_configs: [{targets: %s}]}\n" % targets([indexer_metrics]))
    checked = subprocess.run([promtool, "check", "config", config], capture_output=True, text=True)
    if checked.returncode != 0:
        fail("promtool check config: " + checked.stdout + checked.stderr)
    prom_port = next_port()
    prom = "http://127.0.0.1:%d" % prom_port
    h.start([prometheus, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % prom_port], "prometheus.log")

    def query(expr):
        status, body = http(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10)
        if status in (0, 503):
            raise OSError("Prometheus is not answering yet")  # wait_until tries again
        if status != 200:
            fail("Prometheus refused %r: %d %s" % (expr, status, body[:300]))
        return json.loads(body)["data"]["result"]

    wait_until(lambda: len([r for r in query("up") if r["value"][1] == "1"]) == 6, 60, "Prometheus scraping all 6 targets")

    # A steady load: uncached searches, repeats (cache hits) and a few bad requests (400).
    queries = [line.rstrip("\n").split("\t", 1)[1] for line in open(os.path.join(data, "queries.tsv"))]
    stop, sent = threading.Event(), [0]

    def load(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            r = rng.random()
            if r < 0.05:
                http(base + "/search?q=wing&k=0")
            else:
                text = queries[rng.randrange(len(queries))] + ("" if r < 0.4 else " %d" % rng.randrange(10 ** 6))
                http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10}))
            sent[0] += 1

    threads = [threading.Thread(target=load, args=(s,), daemon=True) for s in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: sent[0] > 300, 60, "load")
    # Rates need two samples in their window; the broker's request histogram must have moved.
    wait_until(lambda: query("sum(rate(warpsearch_broker_request_seconds_count[1m])) > 0"), 60, "rates in Prometheus")

    # Every panel query of every dashboard returns data.
    substitute = lambda e: e.replace("$namespace", ".*").replace("$pod", ".*").replace("$__rate_interval", "1m")
    panels = 0
    for path in sorted(glob.glob(os.path.join(source, "k8s/components/monitoring/dashboards/*.json"))):
        dashboard = json.load(open(path))
        names = [v["name"] for v in dashboard["templating"]["list"]]
        if not {"namespace", "pod", "datasource"} <= set(names):
            fail("%s: variables namespace, pod and datasource expected, got %s" % (path, names))
        for p in dashboard["panels"]:
            for target in p["targets"]:
                if 'namespace=~"$namespace"' not in target["expr"]:
                    fail("%s / %s: the query ignores $namespace: %s" % (os.path.basename(path), p["title"], target["expr"]))
                wait_until(lambda: query(substitute(target["expr"])), 20,
                           "data for %s / %s: %s" % (os.path.basename(path), p["title"], target["expr"]))
                panels += 1
    # The leaves' scheduler ran (--scheduler-cpu-as-gpu: a CPU processor in the GPU's place) and
    # answered on both of its processors: its panels show a working scheduler, not only zeros.
    for processor in ("cpu", "gpu"):
        wait_until(lambda: query('sum(warpsearch_leaf_scheduler_queries_total{processor="%s"}) > 0' % processor), 30,
                   "the leaves' scheduler answering on its %s processor" % processor)
    # Every alert's signal returns data (its expression without the final comparison).
    alerts = 0
    loaded = json.loads(http(prom + "/api/v1/rules")[1])["data"]["groups"]  # the rules as Prometheus loaded them
    for expr in [r["query"] for g in loaded for r in g["rules"] if r["type"] == "alerting"]:
        signal_expr = re.sub(r"\s*(>|<|==|>=|<=)\s*[0-9.]+$", "", expr)
        if signal_expr == expr:
            fail("alert expression without a final comparison: " + expr)
        wait_until(lambda: query(signal_expr), 20, "data for the alert signal " + signal_expr)
        alerts += 1
    if alerts != 10:
        fail("expected the 10 alerts of %s, found %d expressions" % (rules, alerts))
    print("monitoring_test: %d panel queries and %d alert signals return data" % (panels, alerts))

    # Both replicas of partition 1 stop: the partition alert fires for partition 1 (for: 30s).
    for proc, _, _ in leaves[2:]:
        proc.send_signal(signal.SIGTERM)

    def firing():
        body = json.loads(http(prom + "/api/v1/alerts")[1])
        return [a for a in body["data"]["alerts"] if a["labels"]["alertname"] == "WarpsearchPartitionWithoutReadyReplica"
                and a["state"] == "firing"]

    wait_until(lambda: firing(), 90, "WarpsearchPartitionWithoutReadyReplica to fire")
    if [a["labels"]["partition"] for a in firing()] != ["1"]:
        fail("the alert should fire for partition 1 only: %s" % firing())
    stop.set()
    for t in threads:
        t.join()
    print("monitoring_test: WarpsearchPartitionWithoutReadyReplica fired for partition 1; all checks passed")
finally:
    h.cleanup()
