#!/usr/bin/env python3
"""Answers stay whole while generations are folded and swapped under a flow of writes, with the real
binaries on loopback (warp-indexer serve over Cranfield folding every half second, two leaves, one
per partition, tailing its log, a broker with --indexer). A fold moves written documents from the
segment of the partition their id hashes to into the docID range of a fresh build, often another
partition; the leaves must not swap at different moments as the broker sees them. Bulk writes of
new ids, replacements (of written documents and of Cranfield's) and deletes go on through several
folds; after each, a search of a word every written document holds, with after= its last sequence,
must hold every document whose last write by then is a put exactly once, none whose last write is a
delete, and nothing twice; searches without after= running beside them must never hold an id twice.
usage: fold_consistency_test.py BUILD_DIR CRANFIELD_DIR"""
import collections, json, os, random, sys, threading, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-fold-consistency-")
fail = h.fail
seed = int(os.environ.get("WARP_TEST_SEED", random.randrange(1 << 30)))
print("random seed %d (replay with WARP_TEST_SEED=%d)" % (seed, seed))
rng = random.Random(seed)
MARK = "zyzzyva"  # no Cranfield document holds it
# Ids written: at most 700 new ones and 250 of Cranfield's, so that every answer fits k = 1,000.
CRANFIELD_IDS = [json.loads(line)["id"] for line in open(os.path.join(data, "docs.jsonl"))][:250]

try:
    cluster = WritesCluster(h, data, "fold-token-1", fold_interval_ms=500)

    def search(**params):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(params), timeout=30)
        if status != 200:
            fail("search %s: %d %s" % (params, status, body[:300]))
        answer = json.loads(body)
        if answer["partial"]:
            fail("a partial answer: %s" % body[:300])
        return [x["id"] for x in answer["hits"]]

    def generations():
        status, body, _ = cluster.call("GET", "/cluster")
        return {r["generation"] for p in json.loads(body)["partitions"] for r in p["replicas"]} if status == 200 else set()

    # Searches without after= beside the writes: an id twice is never right.
    stop, doubled, unafter = threading.Event(), [], [0]

    def reader():
        while not stop.is_set():
            try:
                status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode({"q": MARK, "k": 1000}))
            except OSError as e:  # the cluster stopped under it after a failure
                if not stop.is_set():
                    doubled.append(repr(e))
                return
            if status != 200 or json.loads(body)["partial"]:
                doubled.append("status %d: %s" % (status, body[:200]))
                continue
            ids = [x["id"] for x in json.loads(body)["hits"]]
            unafter[0] += 1
            twice = [i for i, n in collections.Counter(ids).items() if n > 1]
            if twice:
                doubled.append(twice[:5])

    reader_thread = threading.Thread(target=reader, daemon=True)
    reader_thread.start()

    last_write = {}  # id -> (sequence, "put" | "delete")
    seen_generations, next_id, checked, rounds = set(generations()), 0, 0, 0
    started = time.time()
    while rounds < 400 and (len(seen_generations) < 6 or rounds < 40):
        if time.time() - started > 150:
            fail("only %d generations seen in 150 s: %s" % (len(seen_generations), sorted(seen_generations)))
        lines, ops = [], []
        for _ in range(rng.randint(5, 40)):
            roll = rng.random()
            if (roll < 0.6 and next_id < 700) or not last_write:
                doc_id, next_id = "w%d" % next_id, next_id + 1
            elif roll < 0.8:
                doc_id = rng.choice(list(last_write))
            else:
                doc_id = rng.choice(CRANFIELD_IDS)
            if doc_id in [o[0] for o in ops]:
                continue  # one write of an id a request: its order is the line order, kept simple
            ops.append((doc_id, "put"))
            lines.append(json.dumps({"id": doc_id, "title": "%s %d" % (MARK, rounds), "body": "%s flow" % MARK}))
        status, answer, _ = cluster.call("POST", "/indexes/default/documents", ("\n".join(lines) + "\n").encode(),
                                         timeout=30)
        if status != 200:
            fail("bulk: %d %s" % (status, answer[:300]))
        items = json.loads(answer)["items"]
        for (doc_id, op), item in zip(ops, items):
            last_write[doc_id] = (item["sequence"], op)
        sequence = max(item["sequence"] for item in items)
        if rng.random() < 0.3:  # a delete of a document held
            victim = rng.choice([i for i, (_, op) in last_write.items() if op == "put"])
            status, answer, _ = cluster.call("DELETE", "/indexes/default/documents/" + urllib.parse.quote(victim))
            if status != 200:
                fail("delete %s: %d %s" % (victim, status, answer))
            sequence = json.loads(answer)["sequence"]
            last_write[victim] = (sequence, "delete")
        ids = search(q=MARK, k=1000, after=sequence)
        counts = collections.Counter(ids)
        want = {i for i, (_, op) in last_write.items() if op == "put"}
        twice = sorted(i for i, n in counts.items() if n > 1)
        missing = sorted(want - set(counts))
        extra = sorted(set(counts) - want)
        if twice or missing or extra:
            fail("round %d, after=%d (generations %s): %d documents, %d expected; twice %s, missing %s, extra %s" % (
                rounds, sequence, sorted(generations()), len(ids), len(want), twice[:5], missing[:5], extra[:5]))
        checked += 1
        rounds += 1
        seen_generations |= generations()
    stop.set()
    reader_thread.join()
    if doubled:
        fail("%d searches without after= failed or held an id twice, e.g. %s" % (len(doubled), doubled[:3]))
    print("fold_consistency_test: %d rounds, %d written ids, generations %d..%d served meanwhile, every answer "
          "whole (%d searches without after= beside them)" % (rounds, len(last_write), min(seen_generations),
                                                                max(seen_generations), unafter[0]))
finally:
    h.cleanup()
