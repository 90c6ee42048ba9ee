#!/usr/bin/env python3
"""Phrases through the broker, with the real binaries on loopback (warp-indexer serve over Cranfield,
keeping word positions by default, two leaves tailing its write log, a broker with --indexer):
documents written through the API from a small vocabulary are searched with random phrases while
they are searched beside the generation, after some are replaced and deleted, and again once a
generation holding them is built (by the indexer's pipeline) and served. Each phrase's answer holds
exactly the written documents where the test finds the phrase's words one after another (in the
title or in the body), an excluded phrase keeps exactly those out, and the scores are those of the
words without quotes. Snippets wrap a phrase in one pair of tags. An index built with
--no-positions answers a phrase with a 400 that says why.
usage: phrase_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, random, sys, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-phrases-")
fail = h.fail
seed = int(os.environ.get("WARP_TEST_SEED", random.randrange(1 << 30)))
print("random seed %d (replay with WARP_TEST_SEED=%d)" % (seed, seed))
rng = random.Random(seed)
# Words no Cranfield document holds, each its own stem.
WORDS = ["quokka", "wombat", "dingo", "numbat", "bilby"]

try:
    cluster = WritesCluster(h, data, "phrases-token-1", indexer_flags=["--fold-max-writes", "500"])

    def search(expect=200, **params):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(params), timeout=30)
        if status != expect:
            fail("search %s: %d, expected %d: %s" % (params, status, expect, body[:300]))
        answer = json.loads(body)
        if status == 200 and answer["partial"]:
            fail("a partial answer: %s" % body[:300])
        return answer

    # Cranfield: a phrase's documents are among its words' required together, and fewer.
    phrase = search(q='"boundary layer"', k=1000, snippet="body")
    both = search(q="+boundary +layer", k=1000)
    ids, both_ids = {x["id"] for x in phrase["hits"]}, {x["id"] for x in both["hits"]}
    if not ids or not ids < both_ids:
        fail("\"boundary layer\": %d documents, +boundary +layer %d" % (len(ids), len(both_ids)))
    if "<em>boundary layer</em>" not in phrase["hits"][0]["snippet"].lower():
        fail("the phrase is not highlighted as one: %s" % phrase["hits"][0]["snippet"])
    scores = {x["id"]: x["score"] for x in both["hits"]}
    if any(x["score"] != scores[x["id"]] for x in phrase["hits"]):
        fail("a phrase changed the scores of its words")

    written = {}

    def text(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    def put_all(docs):
        body = "".join(json.dumps(d) + "\n" for d in docs).encode()
        status, answer, _ = cluster.call("POST", "/indexes/default/documents", body, timeout=30)
        if status != 200:
            fail("bulk: %d %s" % (status, answer[:300]))
        for d in docs:
            written[d["id"]] = d
        return max(item["sequence"] for item in json.loads(answer)["items"])

    def holds(doc, words):
        for field in ("title", "body"):
            have = doc.get(field, "").split()
            if any(have[i:i + len(words)] == words for i in range(len(have) - len(words) + 1)):
                return True
        return False

    def check(label, after):
        for _ in range(25):
            words = [rng.choice(WORDS) for _ in range(rng.randint(2, 3))]
            quoted = '"%s"' % " ".join(words)
            got = {x["id"] for x in search(q=quoted, k=1000, mode="or", after=after)["hits"]}
            want = {i for i, d in written.items() if holds(d, words)}
            if got != want:
                fail("%s: %s: %d documents, expected %d (missing %s, extra %s)" % (
                    label, quoted, len(got), len(want), sorted(want - got)[:5], sorted(got - want)[:5]))
            word = rng.choice(WORDS)
            got = {x["id"] for x in search(q='%s -%s' % (word, quoted), k=1000, mode="or", after=after)["hits"]}
            want = {i for i, d in written.items()
                    if word in (d.get("title", "") + " " + d.get("body", "")).split() and not holds(d, words)}
            if got != want:
                fail("%s: %s -%s: %d documents, expected %d" % (label, word, quoted, len(got), len(want)))

    last = put_all([{"id": "p%d" % i, "title": text(rng.randint(0, 3)), "body": text(rng.randint(1, 14))}
                    for i in range(300)])
    check("written", last)
    # Replaced (the phrase follows the new words) and deleted.
    last = put_all([{"id": "p%d" % i, "body": text(rng.randint(1, 14))} for i in range(0, 300, 7)])
    for i in range(3, 300, 11):
        status, answer, _ = cluster.call("DELETE", "/indexes/default/documents/p%d" % i)
        if status != 200:
            fail("delete p%d: %d %s" % (i, status, answer))
        written.pop("p%d" % i)
        last = json.loads(answer)["sequence"]
    check("replaced and deleted", last)
    # Past --fold-max-writes: a generation built from the writes, its positions made by the pipeline.
    last = put_all([{"id": "q%d" % i, "title": text(2), "body": text(rng.randint(1, 10))} for i in range(200)])
    h.wait_until(lambda: cluster.indexer_metric("warpsearch_indexer_folded_sequence") >= 500, 120,
                 "a generation holding the writes")
    generation = cluster.indexer_metric("warpsearch_indexer_generation")

    # Checked once both leaves serve it: while one has swapped and the other not, a document written
    # to one partition's segment and folded into the other's docIDs is in neither answer or in both.
    def served():
        status, body, _ = cluster.call("GET", "/cluster")
        replicas = [r for p in json.loads(body)["partitions"] for r in p["replicas"]] if status == 200 else []
        return replicas and all(r["generation"] >= generation and r["healthy"] for r in replicas)

    h.wait_until(served, 90, "both leaves serving generation %d" % generation)
    check("folded", last)
    print("phrase_test: %d written documents, phrases exact on the segments and the generation" % len(written))

    # An index without word positions says so (a cluster of its own, in a scratch directory of its own).
    h.cleanup()
    h = Harness(build, "warp-phrases-plain-")
    fail = h.fail
    plain = WritesCluster(h, data, "phrases-token-2", indexer_flags=["--no-positions"])
    status, body, _ = plain.call("GET", "/search?" + urllib.parse.urlencode({"q": '"boundary layer"'}))
    if status != 400 or "word positions" not in body:
        fail("a phrase on an index without positions: %d %s" % (status, body[:300]))
    status, _, _ = plain.call("GET", "/search?q=boundary+layer")
    if status != 200:
        fail("words on an index without positions: %d" % status)
    print("phrase_test: ok")
finally:
    h.cleanup()
