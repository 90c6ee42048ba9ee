#!/usr/bin/python3
"""sphinx_compare: the local cluster's broker (deploy/local/run.sh) side by side with Sphinx searchd
(apt sphinxsearch) serving the same corpus as a distributed index of 2 agents on this machine,
both driven by the same Python load generator (N processes, one keep-alive connection each,
distinct queries, OR top-10). Sphinx ranks with sum(bm25f(0.9, 0.4)), BM25 with our k1 and b.
usage: sphinx_compare.py [--corpus data/corpus/gcide.jsonl] [--seconds 10] [--clients 16]"""
import argparse, http.client, json, multiprocessing, os, random, re, shutil, subprocess, tempfile, time, urllib.parse
from xml.sax.saxutils import escape

parser = argparse.ArgumentParser()
parser.add_argument("--corpus", default="data/corpus/gcide.jsonl")
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--clients", type=int, default=16)
parser.add_argument("--broker", default="127.0.0.1:8080")
args = parser.parse_args()

work = tempfile.mkdtemp(prefix="warp-sphinx-")
docs = [json.loads(line) for line in open(args.corpus)]
half = len(docs) // 2
for part, chunk, first in ((0, docs[:half], 1), (1, docs[half:], half + 1)):
    with open(os.path.join(work, "part%d.xml" % part), "w") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?>\n<sphinx:docset>\n<sphinx:schema>'
                '<sphinx:field name="title"/><sphinx:field name="body"/></sphinx:schema>\n')
        for i, d in enumerate(chunk):
            f.write('<sphinx:document id="%d"><title>%s</title><body>%s</body></sphinx:document>\n'
                    % (first + i, escape(d.get("title", "")), escape(d.get("body", ""))))
        f.write("</sphinx:docset>\n")
conf = os.path.join(work, "sphinx.conf")
with open(conf, "w") as f:
    for part in (0, 1):
        f.write("source part%d\n{\n type = xmlpipe2\n xmlpipe_command = cat %s/part%d.xml\n}\n" % (part, work, part))
        f.write("index part%d\n{\n source = part%d\n path = %s/part%d\n morphology = stem_en\n}\n" % (part, part, work, part))
    f.write("index dist\n{\n type = distributed\n agent = 127.0.0.1:9412:part0\n agent = 127.0.0.1:9412:part1\n"
            " agent_connect_timeout = 3000\n agent_query_timeout = 10000\n}\n")
    f.write("searchd\n{\n listen = 127.0.0.1:9412\n listen = 127.0.0.1:9406:mysql41\n log = %s/searchd.log\n"
            " query_log = %s/query.log\n pid_file = %s/searchd.pid\n workers = threads\n binlog_path =\n}\n" % (work, work, work))
subprocess.run(["indexer", "--config", conf, "--all", "--quiet"], check=True)
subprocess.run(["searchd", "--config", conf], check=True, stdout=subprocess.DEVNULL)
# searchd binds asynchronously: wait for the SphinxQL port before the load starts.
time.sleep(1)

# Distinct queries; each also carries a word found in no document, unique to this run, so that no
# answer can come from the broker's result cache (of this run or an earlier one).
random.seed(9)
run_tag = "zq%x" % random.SystemRandom().getrandbits(40)
queries = []
while len(queries) < 400000:
    words = re.findall(r"[a-z]{3,}", random.choice(docs)["body"].lower())
    if len(words) >= 4:
        queries.append(" ".join(random.sample(words, random.randint(1, 4))) + " %s%d" % (run_tag, len(queries)))


def client(kind, offset, seconds, out):
    latencies = []
    if kind == "sphinx":
        import pymysql
        conn = pymysql.connect(host="127.0.0.1", port=9406, user="", autocommit=True)
        cur = conn.cursor()
        run = lambda q: (cur.execute("SELECT id FROM dist WHERE MATCH(%s) LIMIT 10 OPTION ranker=expr('sum(bm25f(0.9,0.4))')",
                                     ('"%s"/1' % q,)), cur.fetchall())
    else:
        host, port = args.broker.split(":")
        conn = http.client.HTTPConnection(host, int(port))

        def run(q):
            conn.request("GET", "/search?k=10&q=" + urllib.parse.quote_plus(q))
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(body)
    end = time.time() + seconds
    i = offset
    while time.time() < end:
        start = time.perf_counter()
        run(queries[i % len(queries)])
        latencies.append(time.perf_counter() - start)
        i += 1
    out.put(latencies)


def load(kind, phase):
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client, args=(kind, phase * 200000 + c * 12000, args.seconds, out))
             for c in range(args.clients)]
    for p in procs:
        p.start()
    latencies = []
    for _ in procs:
        latencies += out.get()
    for p in procs:
        p.join()
    latencies.sort()
    return len(latencies) / args.seconds, latencies[len(latencies) // 2] * 1e3, latencies[int(len(latencies) * 0.99)] * 1e3


try:
    print("| engine | clients | q/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    results = {}
    for phase, kind in enumerate(("warpsearch", "sphinx")):
        qps, p50, p99 = load(kind, phase)
        results[kind] = qps
        print("| %s | %d | %.0f | %.2f | %.2f |" % (kind, args.clients, qps, p50, p99), flush=True)
    print("\nwarpsearch / sphinx throughput: %.2f×" % (results["warpsearch"] / results["sphinx"]))
finally:
    subprocess.run(["searchd", "--config", conf, "--stopwait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)
