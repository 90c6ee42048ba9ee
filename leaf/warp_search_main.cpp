// warp-search: answers queries straight from partition directories with the CPU query processor;
// writes a TREC run and prints throughput and latency percentiles.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/query/filter.hpp"
#include "common/query/query_syntax.hpp"
#include "common/analysis/analyzer.hpp"
#include "common/index/index_files.hpp"
#include "common/util/flags.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/query/index_searcher.hpp"
#include "leaf/query/query_log.hpp"

namespace {

constexpr const char* kUsage =
    "usage: warp-search --index DIR (--queries FILE.tsv [--run OUT] | --query TEXT) [--mode and|or|andor] [-k N]\n"
    "\n"
    "Answers BM25 top-k queries from an index directory or one partition directory.";

using Clock = std::chrono::steady_clock;

struct Answer {
  std::vector<warp::Hit> hits;
  double latency_ms = 0;
  std::string error;  // the query failed: why (no exception leaves a worker thread)
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()))];
}

int run(int argc, char** argv) {
  warp::Flags flags(kUsage);
  flags.value("index", "", "index directory (all partitions) or one partition directory")
      .value("queries", "", "query file: qid<TAB>text per line")
      .value("query", "", "one query to answer; prints the hits with titles")
      .value("run", "", "write a TREC run here (qid Q0 external_id rank score warp)")
      .value("mode", "or", "and, or, or andor (AND, then OR when AND finds fewer than k)")
      .value("k", "10", "hits per query, 1..10000")
      .value("syntax", "plain",
             "plain (words only, as TREC topics are written) or query (the broker's query syntax: +required "
             "-excluded, docs/api.md)")
      .value("or-algorithm", "tiles",
             "exact OR top-k by tiles (MaxScore over docID tiles), bmw (BlockMax-WAND) or maxscore")
      .value("filter", "",
             "a filter over the index's keyword and numeric fields for every query (the broker's filter syntax, "
             "e.g. 'lang:en AND year>=1990'); repeated: joined with AND",
             true)
      .value("threads", "1", "worker threads (0: all cores)")
      .value("processor", "cpu", "cpu, or gpu (the GPU query processor, see the --gpu-* flags)")
      .value("bm25-k1", "", "BM25 k1 (default: the index's)")
      .value("bm25-b", "", "BM25 b (default: the index's)")
      .value("bm25-k3", "",
             "BM25 k3, query-term saturation: 0 counts a repeated term once, inf weighs it linearly (default: the "
             "index's)");
  warp::gpu::declare_gpu_flags(flags);
  flags.parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.help_text().c_str());
    return 0;
  }
  if (flags.get("index").empty() || (flags.get("queries").empty() == flags.get("query").empty())) {
    throw warp::Error("--index and one of --queries or --query are required\n" + flags.help_text());
  }
  const uint64_t k = flags.count("k");
  if (k < 1 || k > warp::kMaxTopK) throw warp::Error("-k must be between 1 and 10000");
  const warp::QueryMode mode = warp::parse_query_mode(flags.get("mode"));
  if (flags.get("syntax") != "plain" && flags.get("syntax") != "query")
    throw warp::Error("--syntax must be plain or query");
  const bool syntax = flags.get("syntax") == "query";
  std::shared_ptr<const warp::FilterNode> filter;  // --filter, checked against the index's fields once loaded
  const auto to_query = [&](warp::Analyzer& analyze, const std::string& text) {
    warp::Query query =
        syntax ? warp::analyze_query_syntax(text, analyze, mode, k) : warp::Query(analyze.analyze_query(text), mode, k);
    query.filter = filter;
    return query;
  };
  warp::OpenOptions open_options;
  for (auto [flag, value] : {std::pair{"bm25-k1", &open_options.bm25.k1}, std::pair{"bm25-b", &open_options.bm25.b},
                             std::pair{"bm25-k3", &open_options.bm25.k3}}) {
    if (flags.is_set(flag)) *value = static_cast<float>(flags.number(flag));
  }
  warp::check_bm25_params(open_options.bm25.applied_to({}));
  const auto load_start = Clock::now();
  const std::string processor = flags.get("processor");
  if (processor != "cpu" && processor != "gpu") throw warp::Error("--processor must be cpu or gpu");
  const warp::CpuProcessorOptions cpu_options{warp::parse_or_algorithm(flags.get("or-algorithm"))};
  const warp::gpu::GpuSettings gpu_settings = warp::gpu::gpu_settings_from(flags);
  warp::IndexSearcher searcher(warp::open_index(flags.get("index"), open_options),
                               [&](const warp::IndexView& view) -> std::unique_ptr<warp::QueryProcessor> {
                                 if (processor == "gpu") return warp::gpu::make_gpu_processor(view, gpu_settings);
                                 return std::make_unique<warp::CpuQueryProcessor>(view, cpu_options);
                               });
  const warp::AnalyzerConfig analyzer = warp::AnalyzerConfig::from_version(searcher.analyzer_version());
  if (!flags.all("filter").empty()) {
    std::vector<warp::FilterNode> filters;
    for (const std::string& text : flags.all("filter")) filters.push_back(warp::parse_filter(text));
    warp::FilterNode all = warp::and_all(std::move(filters));
    const warp::IndexView& first = searcher.partitions().front()->view();
    warp::check_filter(all, first.columns ? first.columns->schema() : warp::ColumnSchema{});
    filter = std::make_shared<const warp::FilterNode>(std::move(all));
  }
  std::fprintf(stderr, "loaded %zu partition(s) from %s in %.2f s (%s processor)\n", searcher.partitions().size(),
               flags.get("index").c_str(), std::chrono::duration<double>(Clock::now() - load_start).count(),
               processor.c_str());

  if (!flags.get("query").empty()) {
    warp::Analyzer analyze(analyzer);
    const warp::Query query = to_query(analyze, flags.get("query"));
    const warp::QueryResult result = searcher.search(query);
    for (size_t rank = 0; rank < result.hits.size(); ++rank) {
      const warp::Hit& hit = result.hits[rank];
      std::string title;
      for (const auto& partition : searcher.partitions()) {
        if (auto record = partition->document(hit.doc)) title = record->title;
      }
      std::printf("%3zu  %8.4f  %-20s  %s\n", rank + 1, hit.score, searcher.external_id(hit.doc).c_str(),
                  title.c_str());
    }
    if (result.hits.empty()) std::printf("no documents match\n");
    return 0;
  }

  std::vector<std::string> errors;
  const std::vector<warp::QueryLine> queries = warp::read_query_file(flags.get("queries"), errors);
  for (const std::string& error : errors) std::fprintf(stderr, "skipped %s\n", error.c_str());
  size_t threads = flags.count("threads");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());

  std::vector<Answer> answers(queries.size());
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      warp::Analyzer analyze(analyzer);
      for (size_t i = next++; i < queries.size(); i = next++) {
        const auto query_start = Clock::now();
        try {
          answers[i].hits = searcher.search(to_query(analyze, queries[i].text)).hits;
        } catch (const std::exception& e) {
          answers[i].error = e.what();
        }
        answers[i].latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - query_start).count();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  if (!flags.get("run").empty()) {
    std::ofstream out(flags.get("run"));
    if (!out) throw warp::Error("cannot write the run file " + flags.get("run"));
    for (size_t i = 0; i < queries.size(); ++i) {
      std::vector<std::string> ids;
      for (const warp::Hit& hit : answers[i].hits) ids.push_back(searcher.external_id(hit.doc));
      warp::write_trec_run(out, queries[i].id, answers[i].hits, ids, "warp");
    }
  }
  size_t failed = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    if (answers[i].error.empty()) continue;
    std::fprintf(stderr, "query %s failed: %s\n", queries[i].id.c_str(), answers[i].error.c_str());
    ++failed;
  }
  std::vector<double> latencies;
  double total = 0;
  for (const Answer& answer : answers) latencies.push_back(answer.latency_ms), total += answer.latency_ms;
  std::fprintf(
      stderr,
      "%zu queries, mode %s, k=%llu, %zu thread(s): %.1f q/s; latency ms mean %.3f p50 %.3f p90 %.3f p99 %.3f\n",
      queries.size(), flags.get("mode").c_str(), static_cast<unsigned long long>(k), threads,
      seconds > 0 ? queries.size() / seconds : 0.0, queries.empty() ? 0.0 : total / queries.size(),
      percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99));
  if (failed > 0) {
    std::fprintf(stderr, "%zu of %zu queries failed (the run holds the others)\n", failed, queries.size());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return warp::run_main("warp-search", [&] { return run(argc, argv); });
}
