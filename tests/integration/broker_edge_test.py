#!/usr/bin/env python3
"""The broker's HTTP edge through the real binaries on loopback (a warp-leaf per partition of
Cranfield, one warp-broker). Checks, each waiting for the state it means rather than for a fixed
time: hundreds of idle connections do not delay a search; a client that sends half a header is cut
off after --request-timeout-ms; past --max-connections a new connection gets 503 with Retry-After;
with both partitions' leaves stopped (SIGSTOP) and --max-in-flight 2 queries in flight, the next
query is refused at once with 503 and Retry-After, and answers resume once the leaves continue;
/search needs a bearer token from --auth-tokens (401 without), the file is reloaded when it
changes; /metrics, /healthz and /readyz answer on --admin-listen without a token and not on the
search listener; HEAD answers as GET without a body, and another method on /search gets 405 with
Allow; uncached answers are split into the broker's, the transport's and the leaf's stages, which
add up to their time; the new metrics are exported; the token is checked on the header (a POST
without one gets 401 before its body), a kept-alive connection's next request has the request
timeout from its first byte, bodies in flight stay within --max-body-mb-in-flight and connections
from one address within --max-connections-per-source.
usage: broker_edge_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, signal, socket, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, http_full as http  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-edge-")
indexer, leaf, broker = h.indexer, h.leaf, h.broker
work, procs, next_port, start, fail, wait_until = h.work, h.procs, h.next_port, h.start, h.fail, h.wait_until


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


idle = []
try:
    # Cranfield, and documents whose fields test the answer's JSON: control characters, quotes and
    # backslashes, a character past the BMP, U+2028, and a NUL (kept whole, where the leaf had cut
    # the text at it).
    odd = [{"id": "odd-ctrl", "title": "ctrl \u0001\u001f tab\tnl\nquote\" back\\ end", "body": "xyzzyquux one", "url": "http://x/\"y"},
           {"id": "odd-nul\u0000id", "title": "nul\u0000inside", "body": "xyzzyquux two xyzzyquux", "url": "u\u0000rl"},
           {"id": "odd-wide", "title": "emoji \U0001F600 and \u2028 sep", "body": "xyzzyquux three xyzzyquux xyzzyquux"}]
    with open(os.path.join(work, "docs.jsonl"), "w") as out:
        out.write(open(os.path.join(data, "docs.jsonl")).read())
        for doc in odd:
            out.write(json.dumps(doc) + "\n")
    subprocess.run([indexer, "build", "--input", os.path.join(work, "docs.jsonl"), "--out", os.path.join(work, "index"),
                    "--partitions", "2", "--quiet"], check=True, stderr=subprocess.DEVNULL)
    leaves = []
    for i in range(2):
        zmq_port, http_port = next_port(), next_port()
        leaves.append((start([leaf, "--index", os.path.join(work, "index"), "--partitions", str(i), "--listen",
                              "tcp://127.0.0.1:%d" % zmq_port, "--http", "127.0.0.1:%d" % http_port], "leaf%d.log" % i), zmq_port))
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write("# search clients\nfirst-token\n\n")
    search_port, admin_port = next_port(), next_port()
    start([broker, "--partition", "0=tcp://127.0.0.1:%d" % leaves[0][1], "--partition", "1=tcp://127.0.0.1:%d" % leaves[1][1],
           "--listen", "127.0.0.1:%d" % search_port, "--admin-listen", "127.0.0.1:%d" % admin_port, "--auth-tokens", tokens,
           "--max-connections", "400", "--request-timeout-ms", "3000", "--max-in-flight", "2", "--timeout-ms", "4000"],
          "broker.log")
    base, admin = "http://127.0.0.1:%d" % search_port, "http://127.0.0.1:%d" % admin_port
    wait_until(lambda: http(admin + "/readyz")[0] == 200, 20, "broker ready")

    # 1. Tokens: none or a wrong one is 401 with WWW-Authenticate; the listed one searches.
    status, body, headers = http(base + "/search?q=wing")
    if status != 401 or "Bearer" not in headers.get("WWW-Authenticate", "") or "error" not in json.loads(body):
        fail("no token: expected 401 with WWW-Authenticate, got %d %s" % (status, body))
    if http(base + "/search?q=wing", token="wrong")[0] != 401:
        fail("a wrong token was accepted")
    status, body, _ = http(base + "/search?q=wing", token="first-token")
    if status != 200 or not json.loads(body)["hits"]:
        fail("the listed token: %d %s" % (status, body))
    # Rotation: the file changes, the broker follows without a restart.
    with open(tokens, "w") as f:
        f.write("second-token\n")
    os.utime(tokens, (time.time() + 5, time.time() + 5))  # a new mtime even within the same second
    wait_until(lambda: http(base + "/search?q=wing", token="second-token")[0] == 200, 10, "the new token to be accepted")
    if http(base + "/search?q=wing", token="first-token")[0] != 401:
        fail("a removed token is still accepted")
    token = "second-token"

    # 1a'. The odd documents' fields come back as they went in, as valid JSON.
    status, body, _ = http(base + "/search?q=xyzzyquux&k=10", token=token)
    got = {h["id"]: h for h in json.loads(body)["hits"]} if status == 200 else {}
    for doc in odd:
        hit = got.get(doc["id"])
        if hit is None or hit["title"] != doc["title"] or hit["url"] != doc.get("url", ""):
            fail("the fields of %r came back as %r (HTTP %d)" % (doc, hit, status))

    # 1b. HEAD is GET without a body: its head carries the length a GET's body has, and a
    # keep-alive connection goes on with the next request (a body sent after a HEAD would be read
    # as the start of the next answer). Other methods on /search: 405 naming the allowed ones.
    def raw_exchange(port, requests):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(requests.encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data.decode()
                data += chunk
    answer = raw_exchange(admin_port, "HEAD /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
                                      "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    heads = answer.split("HTTP/1.1 ")[1:]
    get_body = json.dumps({"status": "ok"}, separators=(",", ":"))
    if (len(heads) != 2 or not heads[0].startswith("200") or not heads[0].endswith("\r\n\r\n")
            or "Content-Length: %d\r\n" % len(get_body) not in heads[0] or not heads[1].endswith(get_body)):
        fail("HEAD /healthz then GET on one connection: %r" % answer)
    answer = raw_exchange(search_port, "HEAD /search?q=wing HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n"
                                       "DELETE /search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
                                       "Connection: close\r\n\r\n" % (token, token))
    heads = answer.split("HTTP/1.1 ")[1:]
    length = [line for line in heads[0].split("\r\n") if line.startswith("Content-Length: ")] if heads else []
    if (len(heads) != 2 or not heads[0].startswith("200") or not heads[0].endswith("\r\n\r\n")
            or not length or int(length[0].split()[1]) < 100):
        fail("HEAD /search: a 200 head with the answer's length and no body expected, got %r" % answer)
    if not heads[1].startswith("405") or "Allow: GET, HEAD, POST\r\n" not in heads[1]:
        fail("DELETE /search: 405 with Allow expected, got %r" % heads[1])

    # 1b'. "Expect: 100-continue": the 100 comes before the body is sent (a client waiting for it
    # would otherwise stall: curl a second), then the answer; a declared body past the limit gets
    # its 400 at once, unsent. An absolute-form target (RFC 9112 §3.2.2) is the same request.
    body = json.dumps({"q": "wing", "k": 2})
    with socket.create_connection(("127.0.0.1", search_port), timeout=5) as s:
        s.sendall(("POST /search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n"
                   "Expect: 100-continue\r\nConnection: close\r\n\r\n" % (token, len(body))).encode())
        interim = s.recv(4096).decode()
        if not interim.startswith("HTTP/1.1 100 Continue\r\n"):
            fail("Expect: 100-continue: a 100 before the body expected, got %r" % interim)
        s.sendall(body.encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        if not answer.startswith(b"HTTP/1.1 200") or len(json.loads(answer.split(b"\r\n\r\n", 1)[1])["hits"]) != 2:
            fail("Expect: 100-continue: the answer after the body: %r" % answer[:300])
    with socket.create_connection(("127.0.0.1", search_port), timeout=5) as s:
        s.sendall(("POST /search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\nContent-Length: 10000000\r\n"
                   "Expect: 100-continue\r\n\r\n" % token).encode())
        refused = s.recv(4096).decode()
        if not refused.startswith("HTTP/1.1 400") or "too large" not in refused:
            fail("Expect: 100-continue with a body past the limit: 400 at once expected, got %r" % refused)
    answer = raw_exchange(search_port, "GET http://127.0.0.1:%d/search?q=wing&k=1 HTTP/1.1\r\nHost: t\r\n"
                                       "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" % (search_port, token))
    if not answer.startswith("HTTP/1.1 200") or len(json.loads(answer.split("\r\n\r\n", 1)[1])["hits"]) != 1:
        fail("an absolute-form target: %r" % answer[:300])

    # 1b''. Transfer-Encoding other than exactly "chunked" (RFC 9112 §6.3): 400 and the connection
    # closed, so that a body read another way cannot carry a second request (here a search behind
    # a request with no token, which must never be answered).
    smuggled = "GET /search?q=wing&k=1 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n" % token
    for coding in ["identity", "gzip", "chunked, identity", "gzip, chunked"]:
        answer = raw_exchange(search_port, "POST /search HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: %s\r\n\r\n%s"
                                           % (coding, smuggled))
        if not answer.startswith("HTTP/1.1 400") or answer.count("HTTP/1.1 ") != 1:
            fail("Transfer-Encoding: %s: one 400 and a closed connection expected, got %r" % (coding, answer[:400]))
    chunked = json.dumps({"q": "wing", "k": 1})
    answer = raw_exchange(search_port, "POST /search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
                                       "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                                       % (token, len(chunked), chunked))
    if not answer.startswith("HTTP/1.1 200") or len(json.loads(answer.split("\r\n\r\n", 1)[1])["hits"]) != 1:
        fail("Transfer-Encoding: chunked: the search answered expected, got %r" % answer[:300])

    # 1c. The stages of uncached answers: each of twenty distinct queries observed once in each stage
    # (the broker's own time, the transport's, the leaf's), which add up to its time in the broker.
    def stage_sums(text):
        return [(metric(text, 'warpsearch_broker_stage_seconds_count{stage="%s"}' % st) or 0,
                 metric(text, 'warpsearch_broker_stage_seconds_sum{stage="%s"}' % st) or 0) for st in ("broker", "transport", "leaf")]
    text = http(admin + "/metrics")[1]
    stages0, request0 = stage_sums(text), metric(text, "warpsearch_broker_request_seconds_sum")
    for i in range(20):
        status, body, _ = http(base + "/search?q=wing+flow+zqstage%d" % i, token=token)
        if status != 200 or json.loads(body)["cached"] or json.loads(body)["partial"]:
            fail("stage query %d: %d %s" % (i, status, body[:200]))
    text = http(admin + "/metrics")[1]
    stages1, request1 = stage_sums(text), metric(text, "warpsearch_broker_request_seconds_sum")
    counts = [c1 - c0 for (c0, _), (c1, _) in zip(stages0, stages1)]
    sums = [s1 - s0 for (_, s0), (_, s1) in zip(stages0, stages1)]
    if counts != [20, 20, 20] or min(sums) <= 0:
        fail("stages: counts %s, sums %s for 20 uncached answers" % (counts, sums))
    if abs((request1 - request0) - sum(sums)) > 1e-6:
        fail("stages add up to %.6f s, the answers took %.6f s" % (sum(sums), request1 - request0))

    # 2. The admin listener needs no token; the search listener does not serve it.
    for path in ("/healthz", "/readyz", "/metrics", "/cluster"):
        if http(admin + path)[0] != 200:
            fail("admin %s without a token" % path)
    if http(base + "/metrics", token=token)[0] != 404:
        fail("/metrics should be on the admin listener only")
    if http(admin + "/search?q=wing")[0] != 404:
        fail("/search must not be served on the admin listener")

    def kept_alive():
        """A connection idle after one answered request: held open by the keep-alive timeout (60 s),
        not by --request-timeout-ms (3 s), so steps 3 and 4 do not race the broker closing them."""
        s = socket.create_connection(("127.0.0.1", search_port))
        s.sendall(("GET /search?q=wing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % token).encode())
        s.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(4096)
        head, body = answer.split(b"\r\n\r\n", 1)
        length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
        while len(body) < length:
            body += s.recv(4096)
        if not head.startswith(b"HTTP/1.1 200"):
            fail("keep-alive connection: %r" % head[:100])
        return s

    # 3. 300 idle connections, then a search still answers at once.
    for _ in range(300):
        idle.append(kept_alive())
    wait_until(lambda: metric(http(admin + "/metrics")[1], "warpsearch_broker_http_connections") >= 300, 10,
               "300 open connections in the metrics")
    started = time.time()
    status, body, _ = http(base + "/search?q=boundary+layer&k=3", token=token, timeout=5)
    if status != 200 or len(json.loads(body)["hits"]) != 3:
        fail("search with 300 idle connections: %d %s" % (status, body))
    if time.time() - started > 1.0:
        fail("search with 300 idle connections took %.2f s" % (time.time() - started))

    # 4. Past --max-connections (400): 503 with Retry-After, connection closed.
    for _ in range(100):
        idle.append(kept_alive())
    wait_until(lambda: metric(http(admin + "/metrics")[1], "warpsearch_broker_http_connections") >= 400, 10,
               "400 open connections")
    extra = socket.create_connection(("127.0.0.1", search_port))
    extra.settimeout(5)
    answer = b""
    while True:
        chunk = extra.recv(4096)
        if not chunk:
            break
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 503") or b"Retry-After: 1" not in answer:
        fail("connection over the limit: expected 503 with Retry-After, got %r" % answer[:200])
    extra.close()

    # 5. Idle connections that never send are closed after --request-timeout-ms (3 s): a slow client
    # costs a socket for a bounded time. A half-sent header is cut off the same way.
    for s in idle:
        s.close()
    idle.clear()
    wait_until(lambda: metric(http(admin + "/metrics")[1], "warpsearch_broker_http_connections") <= 1, 10,
               "the kept-alive connections closed")
    for _ in range(300):
        idle.append(socket.create_connection(("127.0.0.1", search_port)))
    for s in idle:
        s.settimeout(10)
        if s.recv(1) != b"":
            fail("an idle connection got data instead of being closed")
        s.close()
    idle.clear()
    slow = socket.create_connection(("127.0.0.1", search_port))
    slow.sendall(b"GET /search?q=wing HTTP/1.1\r\nHost: x\r\nAuthor")
    slow.settimeout(10)
    started = time.time()
    if slow.recv(1) != b"":
        fail("a half-sent request got an answer")
    if time.time() - started > 5:
        fail("a half-sent request held its connection %.1f s" % (time.time() - started))
    slow.close()
    text = http(admin + "/metrics")[1]
    if (metric(text, "warpsearch_broker_http_timeouts_total") or 0) < 300:
        fail("timeouts not counted: %s" % metric(text, "warpsearch_broker_http_timeouts_total"))
    if (metric(text, "warpsearch_broker_http_connections_refused_total") or 0) < 1:
        fail("refused connections not counted")

    # 6. Overload: both leaves stopped, two queries hang in the fan-out (--max-in-flight 2), and
    # the third is refused at once.
    for p, _ in leaves:
        p.send_signal(signal.SIGSTOP)
    hanging = []
    for i in range(2):
        t = threading.Thread(target=http, args=(base + "/search?q=hang%d" % i,), kwargs={"token": token, "timeout": 10})
        t.start()
        hanging.append(t)
    wait_until(lambda: metric(http(admin + "/metrics")[1], "warpsearch_broker_in_flight") == 2, 5, "2 queries in flight")
    started = time.time()
    status, body, headers = http(base + "/search?q=refused", token=token)
    elapsed = time.time() - started
    if status != 503 or headers.get("Retry-After") != "1" or "max-in-flight" not in json.loads(body)["error"]:
        fail("overload: expected 503 with Retry-After naming --max-in-flight, got %d %s %s" % (status, body, headers))
    if elapsed > 0.5:
        fail("the overload answer took %.2f s: it must not queue" % elapsed)
    for p, _ in leaves:
        p.send_signal(signal.SIGCONT)
    for t in hanging:
        t.join()
    wait_until(lambda: http(base + "/search?q=shock+wave", token=token)[0] == 200, 10, "answers after the leaves continue")
    text = http(admin + "/metrics")[1]
    if (metric(text, 'warpsearch_broker_rejected_total{reason="in_flight"}') or 0) < 1:
        fail("overload refusals not counted: " + str(metric(text, 'warpsearch_broker_rejected_total{reason="in_flight"}')))
    if (metric(text, "warpsearch_broker_unauthorized_total") or 0) < 3:
        fail("unauthorized requests not counted")

    # 7. The token is checked on the header: a POST with no token declaring a 50 kB body gets its
    # 401 at once, the body never sent, and the connection closes (before, the broker waited for a
    # body that never came until the request timeout, holding what it had read).
    with socket.create_connection(("127.0.0.1", search_port), timeout=5) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 50000\r\n\r\n")
        started, answer = time.time(), b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        if not answer.startswith(b"HTTP/1.1 401") or time.time() - started > 1.5:
            fail("a bodiless POST without a token: 401 at once expected, got %r after %.1f s"
                 % (answer[:60], time.time() - started))

    # 8. A kept-alive connection's next request has --request-timeout-ms (3 s) from its first byte,
    # not the 60 s idle timeout: a request trickled a byte every 0.3 s is cut off.
    with socket.create_connection(("127.0.0.1", search_port), timeout=10) as s:
        s.sendall(("GET /search?q=wing HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n" % token).encode())
        first = b""
        while b"\r\n\r\n" not in first:
            first += s.recv(65536)
        length = int([l for l in first.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
        while len(first.split(b"\r\n\r\n", 1)[1]) < length:
            first += s.recv(65536)
        started, closed = time.time(), False
        for byte in b"GET /search?q=wing HTTP/1.1\r\nHost: t\r\n":
            try:
                s.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.3)
            if time.time() - started > 8:
                break
        s.settimeout(3)
        try:
            closed = closed or s.recv(1) == b""
        except (socket.timeout, OSError):
            pass
        if not closed or time.time() - started > 6.5:
            fail("a trickled keep-alive request held its connection %.1f s (closed: %s)" % (time.time() - started, closed))

    # 9. A second broker, --max-body-mb-in-flight 1 and --max-connections-per-source 12: bodies
    # declared but not yet sent hold their room, and past 1 MiB the next is refused with 503 and
    # Retry-After at once; past 12 connections from 127.0.0.1 the next gets 503 and is closed.
    small_port = next_port()
    start([broker, "--partition", "0=tcp://127.0.0.1:%d" % leaves[0][1], "--partition", "1=tcp://127.0.0.1:%d" % leaves[1][1],
           "--listen", "127.0.0.1:%d" % small_port, "--auth-tokens", tokens, "--max-body-mb-in-flight", "1",
           "--max-connections-per-source", "12", "--request-timeout-ms", "5000"], "broker-small.log")
    wait_until(lambda: http("http://127.0.0.1:%d/search?q=wing" % small_port, token=token)[0] == 200, 20,
               "the second broker answers")
    holding = []
    declared = b"POST /search HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n" \
               b"Content-Length: 100000\r\n\r\n" % token.encode()
    refused = None
    for i in range(11):
        c = socket.create_connection(("127.0.0.1", small_port), timeout=5)
        c.sendall(declared)
        holding.append(c)
        c.settimeout(0.3)
        try:
            got = c.recv(65536)
        except socket.timeout:
            continue
        refused = (i, got)
        break
    if refused is None or refused[0] != 10 or not refused[1].startswith(b"HTTP/1.1 503") or b"Retry-After: 1" not in refused[1]:
        fail("the 11th body of 100 kB past 1 MiB in flight: 503 with Retry-After expected, got %r" % (refused,))
    # Ten hold their bodies' room; the refused one was closed. Two more make twelve, the next is over.
    wait_until(lambda: http("http://127.0.0.1:%d/search?q=wing" % small_port, token=token)[0] == 200, 5,
               "the refused connection closed")
    extra = [socket.create_connection(("127.0.0.1", small_port), timeout=5) for _ in range(3)]
    extra[-1].settimeout(2)
    over = extra[-1].recv(65536)
    if not over.startswith(b"HTTP/1.1 503"):
        fail("the 13th connection from one address: 503 expected, got %r" % over)
    extra[1].settimeout(0.5)
    try:
        if extra[1].recv(1) != b"":
            fail("the 12th connection from one address got data")
    except socket.timeout:
        pass  # open and waiting for its request: as it should
    for c in holding + extra:
        c.close()
    print("broker_edge_test: all checks passed")
finally:
    for s in idle:
        s.close()
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
    h.cleanup()
