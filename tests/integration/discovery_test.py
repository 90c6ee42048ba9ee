#!/usr/bin/env python3
"""Replica discovery by DNS against a real DNS server: dnsmasq on a loopback port, authoritative for
warp.test, serving the records of a hosts file that the test rewrites and reloads (SIGHUP). Four
warp-leaf processes (2 partitions x 2 replicas) listen on the same port at different loopback
addresses, and the broker knows each partition only by name (--partition 0=dns:leaf-p0.warp.test:PORT).
Under a steady query load: a replica appears (added without a restart), a replica disappears (retired,
then killed: no request reaches it), a name resolves to nothing (its partition unavailable: partial
answers, /readyz 503, never a crash) and comes back, and the DNS server dies (the replicas known
are kept, the failures counted). No request fails or comes back partial except while a name has no
address; answers equal warp-search on the same index.
usage: discovery_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, shutil, signal, subprocess, sys, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, PhasedLoad, http  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-discovery-")
work, fail, wait_until = h.work, h.fail, h.wait_until
ADDRESSES = {"l0a": "127.0.0.11", "l0b": "127.0.0.12", "l1a": "127.0.0.21", "l1b": "127.0.0.22"}
try:
    dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
    if not os.path.exists(dnsmasq):
        fail("dnsmasq is missing (deploy/install-deps.sh installs dnsmasq-base)")
    index = os.path.join(work, "index")
    subprocess.run([h.indexer, "build", "--input", os.path.join(data, "docs.jsonl"), "--out", index, "--partitions", "2",
                    "--quiet"], check=True, stderr=subprocess.DEVNULL)
    hosts = os.path.join(work, "hosts")
    records = {"leaf-p0": ["l0a"], "leaf-p1": ["l1a", "l1b"]}

    def write_records():
        staged = hosts + ".new"
        with open(staged, "w") as f:
            for name, leaves in records.items():
                for leaf in leaves:
                    f.write("%s %s.warp.test\n" % (ADDRESSES[leaf], name))
        os.rename(staged, hosts)

    write_records()
    dns_port = h.next_port()
    dns = h.start([dnsmasq, "--keep-in-foreground", "--log-facility=-", "--conf-file=/dev/null", "--pid-file",
                   "--no-resolv", "--no-hosts", "--addn-hosts=" + hosts, "--local=/warp.test/", "--listen-address=127.0.0.1",
                   "--bind-interfaces", "--port=%d" % dns_port, "--user=" + ("root" if os.geteuid() == 0 else str(os.getuid()))],
                  "dnsmasq.log")
    ports = {0: h.next_port(), 1: h.next_port()}
    leaves = {}
    for name, address in ADDRESSES.items():
        partition = int(name[1])
        leaves[name] = h.start([h.leaf, "--index", index, "--partitions", str(partition), "--listen",
                                "tcp://%s:%d" % (address, ports[partition]), "--http", "%s:%d" % (address, h.next_port()),
                                "--workers", "2"], name + ".log")
    broker_port = h.next_port()
    base = "http://127.0.0.1:%d" % broker_port
    h.start([h.broker, "--partition", "0=dns:leaf-p0.warp.test:%d" % ports[0], "--partition",
             "1=dns:leaf-p1.warp.test:%d" % ports[1], "--dns-server", "127.0.0.1:%d" % dns_port, "--dns-refresh-ms", "300",
             "--listen", "127.0.0.1:%d" % broker_port, "--timeout-ms", "1000"], "broker.log")

    def healthy():
        """partition -> sorted addresses of its healthy replicas, as the broker sees them."""
        state = json.loads(http(base + "/cluster")[1])
        return {p["partition"]: sorted(r["endpoint"].split("//")[1].rsplit(":", 1)[0] for r in p["replicas"] if r["healthy"])
                for p in state["partitions"]}

    def known():
        state = json.loads(http(base + "/cluster")[1])
        return {p["partition"]: sorted(r["endpoint"].split("//")[1].rsplit(":", 1)[0] for r in p["replicas"])
                for p in state["partitions"]}

    def expect(replicas, what):
        want = {p: sorted(ADDRESSES[l] for l in ls) for p, ls in replicas.items()}
        wait_until(lambda: healthy() == want and known() == want, 20, what + ": " + json.dumps(want))

    expect({0: ["l0a"], 1: ["l1a", "l1b"]}, "the replicas named in DNS")
    if http(base + "/readyz")[0] != 200:
        fail("/readyz should be 200 with every partition resolved")

    # The cluster's answers equal warp-search over the same index, exactly.
    queries = [line.rstrip("\n").split("\t", 1) for line in open(os.path.join(data, "queries.tsv"))][:40]
    qfile = os.path.join(work, "q.tsv")
    with open(qfile, "w") as f:
        for qid, text in queries:
            f.write("%s\t%s\n" % (qid, text))
    run = os.path.join(work, "run")
    subprocess.run([h.search, "--index", index, "--queries", qfile, "-k", "10", "--run", run], check=True,
                   stderr=subprocess.DEVNULL)
    expected = {}
    for line in open(run):
        qid, _, doc, _, score, _ = line.split()
        expected.setdefault(qid, []).append(doc)
    for qid, text in queries:
        status, body = http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10, "syntax": "plain"}))
        answer = json.loads(body) if status == 200 else {}
        if status != 200 or answer["partial"] or [x["id"] for x in answer["hits"]] != expected.get(qid, []):
            fail("query %s through discovered replicas: %d %s" % (qid, status, body[:300]))

    load = PhasedLoad(h, base, [text for _, text in queries], 3, "discovery_test")
    answers, answered_more, expect_complete = load.answers, load.answered_more, load.expect_complete

    answered_more(30)
    # A replica appears.
    load.phase = "added"
    records["leaf-p0"] = ["l0a", "l0b"]
    write_records()
    dns.send_signal(signal.SIGHUP)
    expect({0: ["l0a", "l0b"], 1: ["l1a", "l1b"]}, "l0b added from DNS")
    answered_more(50)
    expect_complete("added")
    # A replica disappears, then dies: the broker had let go of it.
    load.phase = "removed"
    records["leaf-p1"] = ["l1b"]
    write_records()
    dns.send_signal(signal.SIGHUP)
    expect({0: ["l0a", "l0b"], 1: ["l1b"]}, "l1a retired")
    leaves["l1a"].kill()
    answered_more(50)
    expect_complete("removed")
    # A name with no address: its partition is unavailable (partial answers, /readyz 503).
    load.phase = "no-address"
    records["leaf-p0"] = []
    write_records()
    dns.send_signal(signal.SIGHUP)
    wait_until(lambda: known()[0] == [] and http(base + "/readyz")[0] == 503, 20, "partition 0 without replicas")
    answered_more(20)
    during = load.of("no-address")
    if any(a[1] != 200 for a in during) or not all(a[2] for a in during[-10:]):
        fail("a name without addresses should give partial answers: %s" % during[-3:])
    load.phase = "back"
    records["leaf-p0"] = ["l0b"]
    write_records()
    dns.send_signal(signal.SIGHUP)
    expect({0: ["l0b"], 1: ["l1b"]}, "partition 0 back")
    load.phase = "back-steady"
    answered_more(50)
    expect_complete("back-steady")
    # The DNS server dies: the replicas known are kept, the failed lookups counted.
    load.phase = "dns-down"
    dns.kill()
    dns.wait()

    def dns_failures():
        text = http(base + "/metrics")[1]
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("warpsearch_broker_dns_failures_total"))

    wait_until(lambda: dns_failures() >= 2, 30, "failed lookups counted with the DNS server down")
    answered_more(50)
    expect_complete("dns-down")
    if healthy() != {0: [ADDRESSES["l0b"]], 1: [ADDRESSES["l1b"]]}:
        fail("replicas lost with the DNS server down: %s" % healthy())
    metrics = http(base + "/metrics")[1]
    if 'warpsearch_broker_replicas{partition="0",state="healthy"} 1' not in metrics:
        fail("warpsearch_broker_replicas should show partition 0's one healthy replica")
    load.stop()
    print("discovery_test: all checks passed")
finally:
    h.cleanup()
