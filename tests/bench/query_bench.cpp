// query_bench: q/s and mean/p50/p99 latency of AND, OR (the default, tiled MaxScore) and AND+OR at k=10 and
// k=1000, one thread and all cores, for Warpsearch's CPU processor and Xapian (BM25Weight with the
// same k1 and b) on the same analyzed documents and queries, in one run. Collections: the default
// corpus (GCIDE JSONL) and a synthetic Zipfian collection. Then OR queries with the query syntax's
// constraints (+required, -excluded) against Xapian's OP_AND_MAYBE and OP_AND_NOT.
// usage: query_bench [--corpus data/gcide.jsonl] [--synthetic-docs 300000] [--queries 1000]
#include <unistd.h>
#include <xapian.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "common/index/index_builder.hpp"
#include "common/util/flags.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/synthetic_collection.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;
using Queries = std::vector<std::vector<std::string>>;

struct Collection {
  std::string name;
  std::vector<BuiltPartition> ours;
  std::string xapian_path;
  Queries queries;
  size_t documents = 0;
};

// Adds one analyzed document to both engines.
class DualIndexer {
 public:
  explicit DualIndexer(const std::string& xapian_path)
      : builder_(BuildOptions{}), xapian_(xapian_path, Xapian::DB_CREATE_OR_OVERWRITE) {}
  void add(const std::vector<std::string>& terms) {
    builder_.add_analyzed({std::to_string(count_), "", "", 0}, terms);
    Xapian::Document doc;
    for (const std::string& term : terms) doc.add_term(term);  // wdf counts; doc length = sum of wdf
    xapian_.add_document(doc);
    ++count_;
  }
  std::vector<BuiltPartition> finish() {
    xapian_.commit();
    xapian_.close();
    return builder_.build();
  }
  size_t count() const { return count_; }

 private:
  IndexBuilder builder_;
  Xapian::WritableDatabase xapian_;
  size_t count_ = 0;
};

struct Timing {
  double qps = 0, mean_ms = 0, p50_ms = 0, p99_ms = 0;
  uint64_t hits = 0;
};

template <class Search>  // Search(thread_state, query) → hit count; one state per thread
Timing run_queries(const Queries& queries, size_t threads, Search&& make_searcher) {
  std::vector<double> latency(queries.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> hits{0};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      auto search = make_searcher();
      for (size_t i = next++; i < queries.size(); i = next++) {
        const auto begin = Clock::now();
        hits += search(queries[i]);
        latency[i] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      }
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Timing timing;
  timing.qps = queries.size() / seconds;
  for (double l : latency) timing.mean_ms += l / queries.size();
  timing.p50_ms = bench::percentile(latency, 50);
  timing.p99_ms = bench::percentile(latency, 99);
  timing.hits = hits;
  return timing;
}

Xapian::Query xapian_query(const std::vector<std::string>& terms, Xapian::Query::op op) {
  std::set<std::string> unique(terms.begin(), terms.end());
  return Xapian::Query(op, unique.begin(), unique.end());
}

void bench_collection(const Collection& c, const std::vector<size_t>& thread_counts) {
  std::printf("\n### %s: %zu documents, %zu queries\n\n", c.name.c_str(), c.documents, c.queries.size());
  std::printf(
      "| mode | k | threads | warp q/s | warp mean / p50 / p99 ms | xapian q/s | xapian mean / p50 / p99 ms | "
      "warp/xapian |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  CpuQueryProcessor processor(c.ours[0].view);
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    for (size_t k : {size_t{10}, size_t{1000}}) {
      for (size_t threads : thread_counts) {
        const Timing warp = run_queries(c.queries, threads, [&] {
          return [&](const std::vector<std::string>& q) { return processor.search({q, mode, k}).hits.size(); };
        });
        const Timing xapian = run_queries(c.queries, threads, [&] {
          return [&, db = Xapian::Database(c.xapian_path)](const std::vector<std::string>& q) mutable {
            Xapian::Enquire enquire(db);
            const Bm25Params bm25;  // the index's k1 and b
            enquire.set_weighting_scheme(Xapian::BM25Weight(bm25.k1, 0, 1, bm25.b, 0.5));
            enquire.set_query(xapian_query(q, mode == QueryMode::kOr ? Xapian::Query::OP_OR : Xapian::Query::OP_AND));
            Xapian::MSet mset = enquire.get_mset(0, static_cast<Xapian::doccount>(k));
            if (mode == QueryMode::kAndOr && mset.size() < k) {
              enquire.set_query(xapian_query(q, Xapian::Query::OP_OR));
              mset = enquire.get_mset(0, static_cast<Xapian::doccount>(k));
            }
            return static_cast<size_t>(mset.size());
          };
        });
        std::printf("| %s | %zu | %zu | %.0f | %.3f / %.3f / %.3f | %.0f | %.3f / %.3f / %.3f | %.2f× |\n",
                    std::string(to_string(mode)).c_str(), k, threads, warp.qps, warp.mean_ms, warp.p50_ms, warp.p99_ms,
                    xapian.qps, xapian.mean_ms, xapian.p50_ms, xapian.p99_ms, warp.qps / xapian.qps);
        if (warp.hits != xapian.hits && mode != QueryMode::kOr) {
          std::printf("<!-- note: hit counts differ (warp %llu, xapian %llu) -->\n",
                      static_cast<unsigned long long>(warp.hits), static_cast<unsigned long long>(xapian.hits));
        }
        std::fflush(stdout);
      }
    }
  }
}

// The query syntax's constraints in OR mode on the queries of two terms or more: the first word
// required (`+a b c`: Xapian's OP_AND_MAYBE(a, b OR c)) or the last excluded (`a b -c`: OP_AND_NOT),
// beside the same words as a plain OR, so the table shows what a constraint costs and how it
// compares. Both engines match the same documents (hit counts compared).
void bench_constraints(const Collection& c, const std::vector<size_t>& thread_counts) {
  Queries queries;
  for (const std::vector<std::string>& q : c.queries) {
    const std::set<std::string> distinct(q.begin(), q.end());
    if (distinct.size() >= 2) queries.emplace_back(distinct.begin(), distinct.end());
  }
  std::printf("\n#### %s: constraints in OR mode, %zu queries of 2–4 distinct words\n\n", c.name.c_str(),
              queries.size());
  std::printf(
      "| query | k | threads | warp q/s | warp mean / p50 / p99 ms | xapian q/s | xapian mean / p50 / p99 ms | "
      "warp/xapian |\n|---|---|---|---|---|---|---|---|\n");
  CpuQueryProcessor processor(c.ours[0].view);
  enum Shape { kPlain, kRequired, kExcluded };
  for (Shape shape : {kPlain, kRequired, kExcluded}) {
    for (size_t k : {size_t{10}, size_t{1000}}) {
      for (size_t threads : thread_counts) {
        const Timing warp = run_queries(queries, threads, [&] {
          return [&](const std::vector<std::string>& q) {
            Query query(q, QueryMode::kOr, k);
            if (shape == kRequired) query.required = {q.front()};
            if (shape == kExcluded) query.terms.pop_back(), query.excluded = {{q.back()}};
            return processor.search(query).hits.size();
          };
        });
        const Timing xapian = run_queries(queries, threads, [&] {
          return [&, db = Xapian::Database(c.xapian_path)](const std::vector<std::string>& q) mutable {
            Xapian::Enquire enquire(db);
            const Bm25Params bm25;
            enquire.set_weighting_scheme(Xapian::BM25Weight(bm25.k1, 0, 1, bm25.b, 0.5));
            const Xapian::Query all = xapian_query(q, Xapian::Query::OP_OR);
            const Xapian::Query rest = xapian_query({q.begin() + 1, q.end()}, Xapian::Query::OP_OR);
            const Xapian::Query but_last = xapian_query({q.begin(), q.end() - 1}, Xapian::Query::OP_OR);
            enquire.set_query(shape == kPlain ? all
                              : shape == kRequired
                                  ? Xapian::Query(Xapian::Query::OP_AND_MAYBE, Xapian::Query(q.front()), rest)
                                  : Xapian::Query(Xapian::Query::OP_AND_NOT, but_last, Xapian::Query(q.back())));
            return static_cast<size_t>(enquire.get_mset(0, static_cast<Xapian::doccount>(k)).size());
          };
        });
        const char* written = shape == kPlain ? "`a b c`" : shape == kRequired ? "`+a b c`" : "`a b -c`";
        std::printf("| %s | %zu | %zu | %.0f | %.3f / %.3f / %.3f | %.0f | %.3f / %.3f / %.3f | %.2f× |\n", written, k,
                    threads, warp.qps, warp.mean_ms, warp.p50_ms, warp.p99_ms, xapian.qps, xapian.mean_ms,
                    xapian.p50_ms, xapian.p99_ms, warp.qps / xapian.qps);
        if (warp.hits != xapian.hits) {
          std::printf("<!-- note: hit counts differ (warp %llu, xapian %llu) -->\n",
                      static_cast<unsigned long long>(warp.hits), static_cast<unsigned long long>(xapian.hits));
        }
        std::fflush(stdout);
      }
    }
  }
}

// Queries of 1-4 terms drawn from random documents, as a user who saw the document might type.
Queries sample_queries(const std::vector<std::vector<std::string>>& docs, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Queries queries;
  while (queries.size() < count) {
    const auto& doc = docs[rng() % docs.size()];
    if (doc.size() < 4) continue;
    const size_t n = 1 + rng() % 4;
    std::vector<std::string> q;
    for (size_t i = 0; i < n; ++i) q.push_back(doc[rng() % doc.size()]);
    queries.push_back(q);
  }
  return queries;
}

}  // namespace
}  // namespace warp

int main(int argc, char** argv) {
  using namespace warp;
  Flags flags("usage: query_bench [--corpus FILE.jsonl] [--synthetic-docs N] [--queries N]");
  flags.value("corpus", "data/corpus/gcide.jsonl", "default corpus JSONL (deploy/corpus/gcide_to_jsonl.py)")
      .value("synthetic-docs", "300000", "documents in the synthetic collection (0: skip)")
      .value("queries", "1000", "queries per collection")
      .value("work", "", "scratch directory for the Xapian databases (default: a temporary one)");
  try {
    flags.parse(argc, argv);
    if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    std::vector<size_t> thread_counts{1};
    if (cores > 1) thread_counts.push_back(cores);
    const std::filesystem::path work =
        flags.get("work").empty()
            ? std::filesystem::temp_directory_path() / ("warp-query-bench-" + std::to_string(::getpid()))
            : std::filesystem::path(flags.get("work"));
    std::filesystem::create_directories(work);

    if (!flags.get("corpus").empty()) {
      ReadReport report;
      const auto documents = read_documents({flags.get("corpus")}, report);
      Analyzer analyzer;
      Collection c{"default corpus (" + flags.get("corpus") + ")", {}, (work / "xapian-corpus").string(), {}, 0};
      DualIndexer indexer(c.xapian_path);
      std::vector<std::vector<std::string>> analyzed;
      for (const SourceDocument& doc : documents) {
        std::vector<std::string> terms = analyzer.analyze(doc.title);
        analyzer.analyze(doc.body, terms);
        indexer.add(terms);
        analyzed.push_back(std::move(terms));
      }
      c.documents = indexer.count();
      c.ours = indexer.finish();
      c.queries = sample_queries(analyzed, flags.count("queries"), 7);
      analyzed.clear();
      bench_collection(c, thread_counts);
      bench_constraints(c, thread_counts);
    }
    if (const size_t docs = flags.count("synthetic-docs"); docs > 0) {
      synthetic::CollectionParams params;
      params.documents = static_cast<uint32_t>(docs);
      params.vocabulary = 200000;
      params.mean_length = 100;
      params.seed = 3;
      Collection c{
          "synthetic Zipf(1.0), vocabulary 200k, mean length 100", {}, (work / "xapian-synthetic").string(), {}, 0};
      DualIndexer indexer(c.xapian_path);
      synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) { indexer.add(terms); });
      c.documents = indexer.count();
      c.ours = indexer.finish();
      c.queries = synthetic::generate_queries(static_cast<uint32_t>(flags.count("queries")), params.vocabulary, 4, 11);
      bench_collection(c, thread_counts);
      bench_constraints(c, thread_counts);
    }
    if (flags.get("work").empty()) std::filesystem::remove_all(work);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "query_bench: %s\n", e.what());
    return 1;
  }
}
