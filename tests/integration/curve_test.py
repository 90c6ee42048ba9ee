#!/usr/bin/env python3
"""CurveZMQ between broker and leaf through the real binaries: keys made by `warp-indexer keys`; a
leaf with --curve-keys answers a broker holding an allowed key; a broker whose key is not on the
leaf's allow-list is refused (the leaf counts it in warpsearch_leaf_curve_refused_total) and never
becomes ready; neither does a broker without Curve, nor one that expects another server key. The
leaf's direct search path (--search-listen) is secured by the same keys: the allowed broker's
searches go over it, and a client that connects to it without the Curve handshake gets nothing
back, is disconnected and counted. Strangers on the direct path cannot take the leaf: past
--max-unauthenticated-per-source a source's connections are closed at once, unfinished handshakes
are closed after --handshake-timeout-ms, and with the leaf's descriptors nearly spent the listener
pauses instead of spinning; /healthz and the allowed broker's searches are answered throughout.
usage: curve_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, resource, shutil, socket, struct, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, http  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-curve-")
indexer, leaf, broker = h.indexer, h.leaf, h.broker
work, procs, next_port, start, fail, wait_until = h.work, h.procs, h.next_port, h.start, h.fail, h.wait_until


def refused(leaf_http):
    for line in http(leaf_http + "/metrics")[1].splitlines():
        if line.startswith("warpsearch_leaf_curve_refused_total "):
            return float(line.split()[1])
    return -1


def broker_requests(url, path):
    for line in http(url + "/metrics")[1].splitlines():
        if line.startswith('warpsearch_broker_leaf_requests_total{path="%s"}' % path):
            return float(line.split()[1])
    return -1


def start_broker(name, leaf_port, keys):
    broker_port = next_port()
    args = [broker, "--partition", "0=tcp://127.0.0.1:%d" % leaf_port, "--listen", "127.0.0.1:%d" % broker_port]
    if keys:
        args += ["--curve-keys", keys]
    return start(args, name + ".log"), "http://127.0.0.1:%d" % broker_port


try:
    keys, stranger = os.path.join(work, "keys"), os.path.join(work, "stranger")
    subprocess.run([indexer, "keys", "--out", keys], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([indexer, "keys", "--out", stranger, "--roles", "broker"], check=True, stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(keys, "leaf.pub"), stranger)  # it knows the leaf's public key, not an allowed pair
    if oct(os.stat(os.path.join(keys, "leaf.key")).st_mode & 0o777) != "0o600":
        fail("a secret key file readable by others")
    wrong_server = os.path.join(work, "wrong-server")
    shutil.copytree(keys, wrong_server)
    shutil.copy(os.path.join(stranger, "broker.pub"), os.path.join(wrong_server, "leaf.pub"))  # expects another leaf key

    subprocess.run([indexer, "build", "--input", os.path.join(data, "docs.jsonl"), "--out", os.path.join(work, "index"),
                    "--quiet"], check=True, stderr=subprocess.DEVNULL)
    leaf_port, leaf_http_port, search_port = next_port(), next_port(), next_port()
    start([leaf, "--index", os.path.join(work, "index"), "--listen", "tcp://127.0.0.1:%d" % leaf_port,
           "--http", "127.0.0.1:%d" % leaf_http_port, "--curve-keys", keys, "--search-listen", "127.0.0.1:%d" % search_port],
          "leaf.log")
    leaf_http = "http://127.0.0.1:%d" % leaf_http_port
    wait_until(lambda: http(leaf_http + "/readyz")[0] == 200, 20, "leaf ready")
    if refused(leaf_http) != 0:
        fail("the Curve refusal metric is missing or not zero")

    # An allowed broker: ready, and its searches are answered.
    _, allowed = start_broker("allowed", leaf_port, keys)
    wait_until(lambda: http(allowed + "/readyz")[0] == 200, 20, "the allowed broker to be ready")
    status, body = http(allowed + "/search?q=boundary+layer&k=3")
    if status != 200 or json.loads(body)["partial"] or len(json.loads(body)["hits"]) != 3:
        fail("search through Curve: %d %s" % (status, body))
    # Its searches take the direct path once the link's handshake is done (the first may not).
    wait_until(lambda: http(allowed + "/search?q=shock+wave+%d&k=3" % time.time_ns())[0] == 200
               and broker_requests(allowed, "direct") >= 1, 10, "a search over the Curve-secured direct path")
    over_direct = json.loads(http(allowed + "/search?q=heat+transfer+boundary&k=5")[1])
    if over_direct["partial"] or len(over_direct["hits"]) != 5:
        fail("a search over the direct path: %s" % json.dumps(over_direct))

    # A client on the direct path without the handshake: disconnected with nothing, and counted.
    before = refused(leaf_http)
    raw = socket.create_connection(("127.0.0.1", search_port), timeout=5)
    junk = b"\x00" * 8 + b"not a hello, a request in the clear"
    raw.sendall(struct.pack("<I", len(junk)) + junk)
    got = b""
    try:
        while True:
            chunk = raw.recv(4096)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        fail("the leaf kept a direct-path connection that skipped the handshake open")
    raw.close()
    if got:
        fail("a client without the handshake got %d bytes from the direct path" % len(got))
    wait_until(lambda: refused(leaf_http) >= before + 1, 10, "the leaf to count the refused direct-path client")

    # A key not on the allow-list: the leaf refuses it and counts it; the broker stays unready.
    base = refused(leaf_http)
    _, stranger_url = start_broker("stranger", leaf_port, stranger)
    wait_until(lambda: refused(leaf_http) >= base + 1, 20, "the leaf to refuse the stranger's key")
    wait_until(lambda: http(stranger_url + "/healthz")[0] == 200, 10, "the stranger broker to listen")
    status, body = http(stranger_url + "/search?q=boundary+layer&k=3")
    if status != 200 or not json.loads(body)["partial"] or json.loads(body)["hits"]:
        fail("a refused broker should get a partial answer without hits: %d %s" % (status, body))
    # A broker without Curve, and one expecting another server key: no handshake, never ready.
    _, plain = start_broker("plain", leaf_port, None)
    _, misled = start_broker("misled", leaf_port, wrong_server)
    time.sleep(2)  # time for several status polls: a negative cannot be awaited
    for name, url in (("stranger", stranger_url), ("plain", plain), ("misled", misled)):
        if http(url + "/readyz")[0] != 503:
            fail("the %s broker became ready" % name)
    if http(allowed + "/readyz")[0] != 200:
        fail("the allowed broker lost its leaf")

    # Strangers on the direct path of a second leaf with small limits.
    leaf2_port, leaf2_http_port, search2_port = next_port(), next_port(), next_port()
    leaf2 = start([leaf, "--index", os.path.join(work, "index"), "--listen", "tcp://127.0.0.1:%d" % leaf2_port,
                   "--http", "127.0.0.1:%d" % leaf2_http_port, "--curve-keys", keys,
                   "--search-listen", "127.0.0.1:%d" % search2_port, "--handshake-timeout-ms", "1000",
                   "--max-unauthenticated", "40", "--max-unauthenticated-per-source", "4"], "leaf2.log")
    leaf2_http = "http://127.0.0.1:%d" % leaf2_http_port
    wait_until(lambda: http(leaf2_http + "/readyz")[0] == 200, 20, "the second leaf ready")
    _, allowed2 = start_broker("allowed2", leaf2_port, keys)
    wait_until(lambda: http(allowed2 + "/search?q=wing+%d&k=3" % time.time_ns())[0] == 200
               and broker_requests(allowed2, "direct") >= 1, 20, "the second broker on the direct path")

    def direct_refused(reason):
        for line in http(leaf2_http + "/metrics")[1].splitlines():
            if line.startswith('warpsearch_leaf_direct_refused_total{reason="%s"}' % reason):
                return float(line.split()[1])
        return 0

    def flood(sources, each):
        conns = []
        for source in sources:
            for _ in range(each):
                c = socket.socket()
                c.bind((source, 0))
                c.settimeout(3)
                try:
                    c.connect(("127.0.0.1", search2_port))
                except OSError:
                    c.close()
                    continue
                conns.append(c)
        return conns

    def closed_by_leaf(c, wait):
        c.settimeout(wait)
        try:
            return c.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True

    # One source, twelve connections, four kept: eight closed at once.
    conns = flood(["127.0.0.2"], 12)
    shut = sum(closed_by_leaf(c, 0.5) for c in conns)
    if shut < 8 or direct_refused("source") < 8:
        fail("a source past --max-unauthenticated-per-source 4: %d of 12 closed at once, %s counted"
             % (shut, direct_refused("source")))
    # The kept ones have no handshake: closed after --handshake-timeout-ms (1 s), not held.
    started = time.time()
    if not all(closed_by_leaf(c, 4) for c in conns) or time.time() - started > 3:
        fail("connections without a handshake held %.1f s" % (time.time() - started))
    for c in conns:
        c.close()
    wait_until(lambda: direct_refused("handshake_timeout") >= 4, 5, "the handshake deadlines counted")

    # Twenty sources of eight: past --max-unauthenticated 40 closed at once; meanwhile /healthz and
    # the allowed broker answer.
    fds_before = len(os.listdir("/proc/%d/fd" % leaf2.pid))
    conns = flood(["127.0.0.%d" % i for i in range(10, 30)], 8)
    started = time.time()
    if http(leaf2_http + "/healthz")[0] != 200 or time.time() - started > 1:
        fail("/healthz under a flood of strangers")
    status, body = http(allowed2 + "/search?q=boundary+layer+flood&k=3")
    if status != 200 or json.loads(body)["partial"]:
        fail("the allowed broker's search under a flood: %d %s" % (status, body))
    if direct_refused("unauthenticated") < 1:
        fail("the --max-unauthenticated cap was not reached")
    for c in conns:
        c.close()

    # HELLOs from strangers (a fresh key each: random bytes, as good as any for the server's key
    # exchange) cost their X25519 operations on the handshake thread, not on the front end that
    # answers searches: the CPU time of the leaf's threads by name.
    def thread_cpu(name):
        total = 0
        for tid in os.listdir("/proc/%d/task" % leaf2.pid):
            try:
                if open("/proc/%d/task/%s/comm" % (leaf2.pid, tid)).read().strip() == name:
                    fields = open("/proc/%d/task/%s/stat" % (leaf2.pid, tid)).read().rsplit(")", 1)[1].split()
                    total += int(fields[11]) + int(fields[12])
            except OSError:
                pass
        return total
    handshakes_before = thread_cpu("warp-handshake")
    for round_ in range(40):
        hellos = flood(["127.0.0.%d" % i for i in range(60, 80)], 4)
        for c in hellos:
            try:
                c.sendall(struct.pack("<I", 124) + b"WSH2" + os.urandom(120))
            except OSError:
                pass
        for c in hellos:
            closed_by_leaf(c, 2)
            c.close()
        if thread_cpu("warp-handshake") - handshakes_before >= 3:
            break
    if thread_cpu("warp-handshake") - handshakes_before < 3:
        fail("a flood of HELLOs cost the handshake thread no CPU time (%d ticks): the key exchanges ran elsewhere"
             % (thread_cpu("warp-handshake") - handshakes_before))

    # The leaf's descriptors nearly spent: the listener pauses (counted) rather than spin a core.
    # First the flood's connections closed on the leaf's side too (their places given back).
    wait_until(lambda: len(os.listdir("/proc/%d/fd" % leaf2.pid)) <= fds_before + 2, 10,
               "the leaf to close the flood's connections")
    # A new descriptor takes the lowest free number, refused at the limit: the limit that leaves
    # exactly four free numbers below it (open descriptors may sit above it, past earlier floods).
    open_fds = {int(name) for name in os.listdir("/proc/%d/fd" % leaf2.pid)}
    used, limit, free = len(open_fds), 0, 0
    while free < 4:
        free += limit not in open_fds
        limit += 1
    old = resource.prlimit(leaf2.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(leaf2.pid, resource.RLIMIT_NOFILE, (limit, old[1]))
    conns = flood(["127.0.0.%d" % i for i in range(40, 50)], 2)

    def cpu_seconds():
        fields = open("/proc/%d/stat" % leaf2.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    before, started = cpu_seconds(), time.time()
    time.sleep(1.5)
    spent = (cpu_seconds() - before) / (time.time() - started)
    resource.prlimit(leaf2.pid, resource.RLIMIT_NOFILE, old)
    for c in conns:
        c.close()
    if spent > 0.3:
        fail("out of descriptors, the leaf spent %.0f%% of a core" % (100 * spent))
    if direct_refused("descriptors") < 1:
        fail("the pause for descriptors was not counted (%d fds used, limit %d; refused: %s)" % (
            used, limit, {r: direct_refused(r) for r in ("connections", "unauthenticated", "source",
                                                            "handshake_timeout", "descriptors")}))
    wait_until(lambda: http(allowed2 + "/search?q=heat+%d&k=3" % time.time_ns())[0] == 200, 10,
               "searches after the descriptors came back")
    print("curve_test: all checks passed")
finally:
    h.cleanup()
