#!/usr/bin/env python3
"""A full disk under the write log (docs/writes.md), with the real binaries on loopback: the
indexer's root on a small tmpfs, two leaves tailing its log, a broker. Documents written before the
disk fills stay searchable; once it is full (a file fills the tmpfs) a bulk request is refused with
507 and a clear reason, nothing of it is kept (no sequence taken, nothing searchable), and searches
go on; once space is freed the same request is taken, its sequences right after the last kept; a
kill -9 of the indexer and a restart find exactly the writes acknowledged.
Needs root to mount the tmpfs: exits 77 (skipped) with the reason where it cannot.
usage: full_disk_test.py BUILD_DIR CRANFIELD_DIR"""
import errno, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-full-disk-")
fail, wait_until = h.fail, h.wait_until
disk = os.path.join(h.work, "disk")
os.makedirs(disk)
mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", disk], capture_output=True, text=True)
if mounted.returncode != 0:
    print("full_disk_test: skipped: cannot mount a tmpfs here (%s)" % mounted.stderr.strip())
    h.cleanup()
    sys.exit(77)


def ndjson(docs):
    return ("\n".join(json.dumps(d) for d in docs) + "\n").encode()


def doc(i):  # 6 KB each: an append needs fresh pages of the tmpfs
    return {"id": "f%d" % i, "title": "written %d" % i, "body": ("ffull%d " % i) + "padding " * 750}


def fill(path):
    """Writes `path` until the filesystem has no room left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise


try:
    root = os.path.join(disk, "root")
    c = WritesCluster(h, data, "writer-token-1", root=root)
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson([doc(i) for i in range(20)]))
    if status != 200:
        fail("bulk before the disk fills: %d %s" % (status, text[:300]))
    last = json.loads(text)["sequence"]

    filler = os.path.join(disk, "filler")
    fill(filler)
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson([doc(i) for i in range(20, 25)]))
    if status != 507 or "disk is full" not in text or "nothing of this request was kept" not in text:
        fail("a bulk on a full disk: %d %s (expected 507 and the reason)" % (status, text[:300]))
    status, text, _ = c.call("PUT", "/indexes/default/documents/f99", json.dumps(doc(99)).encode())
    if status != 507:
        fail("a PUT on a full disk: %d %s" % (status, text[:300]))
    # Searches go on; what was acknowledged is there, what was refused is not.
    if c.search_ids("ffull7", after=last) != ["f7"] or c.search_ids("ffull22") != [] or c.search_ids("ffull99") != []:
        fail("searches on a full disk: %s %s %s" % (c.search_ids("ffull7"), c.search_ids("ffull22"),
                                                    c.search_ids("ffull99")))
    inputs_hits = c.search_ids("boundary layer")
    if not isinstance(inputs_hits, list) or len(inputs_hits) != 10:
        fail("a search of the inputs on a full disk: %s" % (inputs_hits,))
    status, text, _ = c.call("GET", "/indexes/default")
    if status != 200 or json.loads(text)["write_sequence"] != last:
        fail("the refused writes took sequences: %d %s (the last kept: %d)" % (status, text, last))

    os.remove(filler)
    status, text, _ = c.call("POST", "/indexes/default/documents", ndjson([doc(i) for i in range(20, 25)]))
    if status != 200 or json.loads(text)["sequence"] != last + 5:
        fail("the same bulk once space is freed: %d %s (expected the sequences after %d)" % (status, text[:300], last))
    last += 5
    if c.search_ids("ffull22", after=last) != ["f22"]:
        fail("a write taken after the disk was freed not searched: %s" % (c.search_ids("ffull22"),))

    # kill -9 and restart: exactly what was acknowledged.
    c.indexer.kill()
    c.indexer.wait()
    c.indexer = h.start(c.indexer_args, "indexer-2.log")
    wait_until(lambda: c.indexer_metric("warpsearch_indexer_write_log_sequence") == last and
               c.indexer_metric("warpsearch_indexer_live_documents") == 1400 + 25, 60,
               "the restarted indexer holding the %d acknowledged writes (1,425 documents)" % last)
    print("full_disk_test: refused with 507 on a full disk, nothing kept, searches answered; taken once freed")
finally:
    for p in h.procs:  # they hold files on the tmpfs: gone before it is unmounted
        if p.poll() is None:
            p.kill()
        p.wait()
    subprocess.run(["umount", disk], capture_output=True)
    h.cleanup()
