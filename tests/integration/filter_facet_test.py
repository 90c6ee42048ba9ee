#!/usr/bin/env python3
"""Filters and facets through the broker, with the real binaries on loopback (warp-indexer serve with
--keyword-fields and --numeric-fields over Cranfield, whose documents have none of the fields, two
leaves tailing its write log, a broker with --indexer): documents written through the API with
random fields are filtered and counted while they are searched beside the generation, after some
are replaced and deleted, and again once a generation holding them is built and served. Each
filtered answer is the unfiltered ranking with the documents the filter refuses left out (a filter
changes no score), and each facet count is the test's own count over the documents it wrote. Bad
filters and facets get a 400 naming what is wrong.
usage: filter_facet_test.py BUILD_DIR CRANFIELD_DIR"""
import json, os, random, sys, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster, http_method  # noqa: E402

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-filters-")
fail = h.fail
seed = int(os.environ.get("WARP_TEST_SEED", random.randrange(1 << 30)))
print("random seed %d (replay with WARP_TEST_SEED=%d)" % (seed, seed))
rng = random.Random(seed)

try:
    # A generation is built from the writes once 600 wait (after the first checks).
    cluster = WritesCluster(h, data, "filters-token-1", fold_interval_ms=3600000,
                            indexer_flags=["--keyword-fields", "lang,tags", "--numeric-fields", "year",
                                           "--fold-max-writes", "600"])

    def search(expect=200, **params):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(params, doseq=True), timeout=30)
        if status != expect:
            fail("search %s: %d, expected %d: %s" % (params, status, expect, body[:300]))
        answer = json.loads(body)
        if status == 200 and answer["partial"]:
            fail("a partial answer: %s" % body[:300])
        return answer

    # Cranfield's documents hold none of the fields: a filter allows none, a facet counts nothing.
    if search(q="boundary layer", filter="year>=0")["hits"]:
        fail("a filter on a field no document holds allowed some")
    plain = search(q="boundary layer", facets="lang")
    if plain["facets"]["lang"]["values"] or plain["matches"] < 100:
        fail("facets over Cranfield: %s" % json.dumps(plain["facets"]))

    # Documents written with fields (a few without, or with a year that is no number).
    written = {}

    def put_all(docs):
        body = "".join(json.dumps(d) + "\n" for d in docs).encode()
        status, text, _ = cluster.call("POST", "/indexes/default/documents", body, timeout=30)
        if status != 200:
            fail("bulk: %d %s" % (status, text[:300]))
        for d in docs:
            written[d["id"]] = d
        return max(item["sequence"] for item in json.loads(text)["items"])

    def random_doc(i):
        doc = {"id": "f%d" % i, "title": "zephyr %d" % i,
               "body": " ".join(rng.choice(["zephyr", "breeze", "gust", "squall", "calm"]) for _ in range(rng.randint(1, 12)))}
        if rng.random() < 0.9:
            doc["lang"] = rng.choice(["en", "fr", "de"])
        doc["tags"] = rng.sample(["red", "green", "blue", "grey"], rng.randint(0, 2))
        doc["year"] = rng.randint(1990, 2025) if rng.random() < 0.85 else "unknown"
        return doc

    last = put_all([random_doc(i) for i in range(400)])

    def allows(doc, lang=None, year_from=None, tag=None):
        if lang is not None and doc.get("lang") != lang:
            return False
        if year_from is not None and not (isinstance(doc.get("year"), int) and doc["year"] >= year_from):
            return False
        return tag is None or tag in doc.get("tags", [])

    def check(label, after):
        for lang, year_from, tag in (("en", None, None), (None, 2010, None), ("fr", 2000, "red"), (None, None, "blue")):
            filters = []
            if lang:
                filters.append("lang:" + lang)
            if year_from is not None:
                filters.append("year>=%d" % year_from)
            if tag:
                filters.append('tags:"%s"' % tag)
            q = rng.choice(["zephyr", "breeze gust", "squall calm zephyr"])
            everything = search(q=q, k=1000, after=after)["hits"]
            for mode in ("or", "and"):
                filtered = search(q=q, k=20, mode=mode, filter=filters, facets="lang,tags,year", facet_size=50, after=after)
                ranked = [x for x in search(q=q, k=1000, mode=mode, after=after)["hits"] if x["id"].startswith("f")]
                expected = [(x["id"], x["score"]) for x in ranked
                            if allows(written[x["id"]], lang, year_from, tag)][:20]
                got = [(x["id"], x["score"]) for x in filtered["hits"]]
                if got != expected:
                    fail("%s: %s %s mode %s: %s, expected %s" % (label, q, filters, mode, got[:5], expected[:5]))
                words = set(q.split())
                matching = [d for d in written.values() if allows(d, lang, year_from, tag) and
                            (words & set((d["title"] + " " + d["body"]).split()) if mode == "or"
                             else words <= set((d["title"] + " " + d["body"]).split()))]
                if filtered["matches"] != len(matching):
                    fail("%s: %s %s mode %s: matches %d, expected %d" % (label, q, filters, mode, filtered["matches"], len(matching)))
                counts = {"lang": {}, "tags": {}, "year": {}}
                for d in matching:
                    if "lang" in d:
                        counts["lang"][d["lang"]] = counts["lang"].get(d["lang"], 0) + 1
                    for t in d["tags"]:
                        counts["tags"][t] = counts["tags"].get(t, 0) + 1
                    if isinstance(d["year"], int):
                        counts["year"][str(d["year"])] = counts["year"].get(str(d["year"]), 0) + 1
                for field, expected_counts in counts.items():
                    facet = filtered["facets"][field]
                    got_counts = {v["value"]: v["count"] for v in facet["values"]}
                    if got_counts != expected_counts or not facet["exact"] or facet["other"] != 0:
                        fail("%s: %s %s mode %s: facet %s %s, expected %s" % (label, q, filters, mode, field, facet, expected_counts))
            if not everything:
                fail("%s: %s found nothing" % (label, q))

    check("written", last)
    # Replaced (their fields changed) and deleted documents: counted as they are now.
    changed = [dict(random_doc(i), id="f%d" % i) for i in rng.sample(range(400), 60)]
    last = put_all(changed)
    for i in rng.sample(range(400), 30):
        status, body, _ = cluster.call("DELETE", "/indexes/default/documents/f%d" % i)
        if status not in (200, 404):
            fail("delete: %d %s" % (status, body))
        written.pop("f%d" % i, None)
        last = json.loads(body)["sequence"]
    check("replaced and deleted", last)

    # More writes: a generation is built from the inputs and the writes (the pipeline's columns) and
    # served by both leaves, and the answers are those of the writes searched beside the generation.
    last = put_all([random_doc(i) for i in range(400, 530)])
    h.wait_until(lambda: cluster.indexer_metric("warpsearch_indexer_folded_sequence") >= last, 120,
                 "the writes folded into a generation")
    generation = cluster.indexer_metric("warpsearch_indexer_generation")

    def served():
        status, body, _ = cluster.call("GET", "/cluster")
        replicas = [r for p in json.loads(body)["partitions"] for r in p["replicas"]] if status == 200 else []
        return replicas and all(r["generation"] >= generation and r["healthy"] for r in replicas)

    h.wait_until(served, 90, "both leaves serving generation %d" % generation)
    check("folded", last)

    # The leaves' filters' cache: filters asked again were taken from it.
    hits = misses = 0
    for leaf in cluster.leaves:
        port = int(leaf.args[leaf.args.index("--http") + 1].rsplit(":", 1)[1])
        for line in http_method("GET", "http://127.0.0.1:%d/metrics" % port)[1].splitlines():
            if line.startswith("warpsearch_leaf_filter_cache_hits_total "):
                hits += float(line.split()[1])
            if line.startswith("warpsearch_leaf_filter_cache_misses_total "):
                misses += float(line.split()[1])
    if hits < 1 or misses < 1:
        fail("the filters' cache: %d hits, %d misses" % (hits, misses))

    # Bad filters and facets: a 400 with the reason.
    for params, words in (({"filter": "colour:red"}, "no field 'colour'"),
                          ({"filter": "(lang:en"}, "column 1"),
                          ({"filter": "lang>=3"}, "keyword field"),
                          ({"filter": "year:soon"}, "not a number"),
                          ({"facets": "colour"}, "no field 'colour'"),
                          ({"facet_size": "0"}, "facet_size")):
        answer = search(expect=400, q="zephyr", **params)
        if words not in answer.get("error", ""):
            fail("%s: %s does not say %r" % (params, answer, words))
    print("filter_facet_test: filters and facets over written, replaced, deleted and folded documents passed")
finally:
    h.cleanup()
