"""What the integration tests share: a scratch directory, processes started with their logs there
and killed at the end, loopback ports, failure reports that show the logs, HTTP calls, and waiting
for a state (never for a fixed time)."""
import json, os, random, shutil, struct, subprocess, sys, tempfile, threading, time, urllib.error, urllib.parse, urllib.request


class Harness:
    def __init__(self, build, prefix):
        self.indexer, self.leaf, self.broker, self.search = (
            os.path.join(build, p) for p in ("indexer/warp-indexer", "leaf/warp-leaf", "broker/warp-broker", "leaf/warp-search"))
        self.work = tempfile.mkdtemp(prefix=prefix)
        self.procs = []
        # Below the ephemeral range (32768+), apart from indexer_service_test (20000-25999).
        self.port = random.randint(26000, 31000)

    def next_port(self):
        self.port += 1
        return self.port

    def start(self, args, log):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.work, log), "w"))
        self.procs.append(p)
        return p

    def signing_flags(self):
        """The flags that sign generations (the indexer's) and check them (a follower's), with a pair
        made by `warp-indexer signing-key` in the scratch directory on first use."""
        keys = os.path.join(self.work, "signing")
        if not os.path.exists(keys):
            subprocess.run([self.indexer, "signing-key", "--out", keys], check=True, stdout=subprocess.DEVNULL)
        return (["--signing-key", os.path.join(keys, "generation-signing.key")],
                ["--generation-key", os.path.join(keys, "generation-signing.pub")])

    def fail(self, message):
        print("FAIL:", message, file=sys.stderr)
        for name in sorted(os.listdir(self.work)):
            if name.endswith(".log"):
                print("==", name, file=sys.stderr)
                print(open(os.path.join(self.work, name)).read()[-3000:], file=sys.stderr)
        raise SystemExit(1)

    def wait_until(self, predicate, seconds, what):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if predicate():
                    return
            except Exception:
                pass
            time.sleep(0.05)
        self.fail("timed out waiting for " + what)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def http_full(url, body=None, timeout=5, token=None):
    """(status, body, headers) of a GET, or a POST of `body`; status 0 when nothing answered."""
    try:
        return http_call("POST" if body is not None else "GET", url, body, timeout, token)
    except OSError:
        return 0, "", {}


def http(url, body=None, timeout=5):
    """(status, body)."""
    return http_full(url, body, timeout)[:2]


def http_call(method, url, body=None, timeout=10, token=None):
    """(status, body, headers) of any method; raises OSError when nothing answered (the caller retries)."""
    request = urllib.request.Request(url, data=body, method=method)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def http_method(method, url, body=None, timeout=10, token=None):
    """(status, body) of any method; raises OSError when nothing answered (the caller retries)."""
    return http_call(method, url, body, timeout, token)[:2]


class WritesCluster:
    """warp-indexer serve with --write and --tail over the documents of `data` (Cranfield), two
    leaves following it with --tail (one per partition), a broker with --indexer whose token
    `token` may read and write. `root`: the indexer's root (default: in the scratch directory);
    `indexer_flags`: more flags for the indexer."""

    def __init__(self, h, data, token, root=None, indexer_flags=(), fold_interval_ms=3600000):
        inputs = os.path.join(h.work, "inputs")
        os.makedirs(inputs)
        shutil.copy(os.path.join(data, "docs.jsonl"), os.path.join(inputs, "cran.jsonl"))
        sign, check = h.signing_flags()
        pub, fetch, write, tail, self.metrics = (h.next_port() for _ in range(5))
        self.indexer_args = [h.indexer, "serve", "--input", inputs, "--root", root or os.path.join(h.work, "root"),
                             "--partitions", "2", "--publish", "tcp://127.0.0.1:%d" % pub, "--fetch",
                             "tcp://127.0.0.1:%d" % fetch, "--write", "tcp://127.0.0.1:%d" % write, "--tail",
                             "tcp://127.0.0.1:%d" % tail, "--rescan", "1", "--fold-interval-ms", str(fold_interval_ms),
                             "--metrics", "127.0.0.1:%d" % self.metrics] + sign + list(indexer_flags)
        self.indexer = h.start(self.indexer_args, "indexer.log")
        self.leaves, leaf_ports = [], []
        for p in (0, 1):
            zmq_port, http_port = h.next_port(), h.next_port()
            self.leaves.append(h.start([h.leaf, "--follow", "tcp://127.0.0.1:%d" % pub, "--tail",
                                        "tcp://127.0.0.1:%d" % tail, "--root", os.path.join(h.work, "leaf%d" % p),
                                        "--partitions", str(p), "--listen", "tcp://127.0.0.1:%d" % zmq_port, "--http",
                                        "127.0.0.1:%d" % http_port, "--workers", "2"] + check, "leaf%d.log" % p))
            leaf_ports.append(zmq_port)
        broker_port = h.next_port()
        self.base = "http://127.0.0.1:%d" % broker_port
        tokens = os.path.join(h.work, "tokens")
        with open(tokens, "w") as f:
            f.write("%s read,write\n" % token)
        os.chmod(tokens, 0o600)
        h.start([h.broker, "--listen", "127.0.0.1:%d" % broker_port, "--partition", "0=tcp://127.0.0.1:%d" % leaf_ports[0],
                 "--partition", "1=tcp://127.0.0.1:%d" % leaf_ports[1], "--indexer", "tcp://127.0.0.1:%d" % write,
                 "--write-timeout-ms", "3000", "--cache-ttl-s", "0", "--auth-tokens", tokens, "--after-wait-ms",
                 "20000"], "broker.log")
        self.token = token
        h.wait_until(lambda: self.call("GET", "/readyz")[0] == 200, 60, "the cluster ready")

    def call(self, method, path, body=None, timeout=10):
        """(status, body, headers) of a call to the broker with the token."""
        return http_call(method, self.base + path, body, timeout, self.token)

    def search_ids(self, q, after=None):
        params = {"q": q, "k": 10}
        if after is not None:
            params["after"] = after
        status, body, _ = self.call("GET", "/search?" + urllib.parse.urlencode(params), timeout=30)
        return [x["id"] for x in json.loads(body)["hits"]] if status == 200 else ("status %d" % status, body[:300])

    def indexer_metric(self, name):
        for line in http_method("GET", "http://127.0.0.1:%d/metrics" % self.metrics)[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return -1


def as_float32(value):
    """A JSON score as the float32 the engine computed (warp-search's runs print more digits)."""
    return struct.unpack("f", struct.pack("f", value))[0]


class PhasedLoad:
    """Threads sending uncached searches (a query text plus a random number) to a broker until
    stopped; every answer is kept with the phase it was sent in, its status, whether it was partial
    and how long it took, so a test can ask what happened during each fault."""

    def __init__(self, harness, base, queries, threads, name):
        self.h, self.name, self.phase, self.answers = harness, name, "steady", []
        self._stop = threading.Event()

        def load(seed):
            rng = random.Random(seed)
            while not self._stop.is_set():
                text = queries[rng.randrange(len(queries))] + " " + str(rng.randrange(10 ** 7))
                sent_in, started = self.phase, time.time()
                status, body = http(base + "/search?" + urllib.parse.urlencode({"q": text, "k": 10}), timeout=5)
                partial = status == 200 and json.loads(body)["partial"]
                self.answers.append((sent_in, status, partial, time.time() - started, body[:200]))

        self._threads = [threading.Thread(target=load, args=(s,), daemon=True) for s in range(threads)]
        for t in self._threads:
            t.start()

    def of(self, phase):
        return [a for a in self.answers if a[0] == phase]

    def answered_more(self, n):
        target = len(self.answers) + n
        self.h.wait_until(lambda: len(self.answers) >= target, 30, "%d more answers under load" % n)

    def expect_complete(self, phase):
        mine = self.of(phase)
        bad = [a for a in mine if a[1] != 200 or a[2]]
        if bad or not mine:
            self.h.fail("%s: %d of %d requests failed or were partial, e.g. %s" % (phase, len(bad), len(mine), bad[:2]))
        print("%s: %s: %d requests, all complete" % (self.name, phase, len(mine)))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join()
