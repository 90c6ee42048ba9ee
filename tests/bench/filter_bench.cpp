// Filters and facets on the GOV2-like preset (gov2_preset.hpp) with generated columns: a keyword
// field `lang` of 20 values drawn Zipf-like (l0 the most frequent) and a numeric field `year`
// uniform over 1990-2019 (none for 5% of the documents). The query log in OR (and AND) mode at k
// 10 unfiltered and under filters of several selectivities, on the CPU processor (one search a
// thread, --threads of them) and on the GPU's lanes (as many client threads), every GPU answer
// checked against the CPU's (the filter evaluated once, then taken from the filters' cache by every
// query, as a leaf does for a filter asked again); then the filters' evaluation alone, uncached and
// cached, and the facets' pass over each query's lists (the leaf's FacetCounter) on the CPU. Prints markdown tables
// (tests/bench/results/cpu-queries.md#filters-and-facets).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <thread>

#include "common/query/filter.hpp"
#include "common/util/flags.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/facet_counts.hpp"
#include "leaf/query/query_constraints.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/gov2_preset.hpp"
#ifdef WARP_HAVE_CUDA
#include "leaf/gpu/gpu_query_processor.hpp"
#endif

namespace warp {
namespace {
using Clock = std::chrono::steady_clock;

std::shared_ptr<const DocColumns> generated_columns(uint32_t documents, uint64_t seed) {
  auto columns = std::make_shared<DocColumns>();
  columns->doc_count = documents;
  KeywordColumn lang;
  lang.field = "lang";
  for (int v = 0; v < 20; ++v) lang.values.push_back("l" + std::to_string(v));
  std::sort(lang.values.begin(), lang.values.end());
  std::vector<double> weights;
  for (int v = 0; v < 20; ++v) weights.push_back(1.0 / (v + 1));
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  NumericColumn year{"year", std::vector<double>(documents)};
  lang.doc_starts.reserve(size_t{documents} + 1);
  lang.doc_starts.push_back(0);
  for (uint32_t d = 0; d < documents; ++d) {
    lang.doc_values.push_back(*lang.find("l" + std::to_string(zipf(rng))));
    lang.doc_starts.push_back(d + 1);
    year.values[d] =
        rng() % 20 == 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(1990 + rng() % 30);
  }
  lang.index_values(documents);
  columns->keyword.push_back(std::move(lang));
  columns->numeric.push_back(std::move(year));
  return columns;
}

struct Run {
  double qps = 0, p50_ms = 0, p99_ms = 0;
};

// The queries searched by `threads` threads, each taking the next; `search` answers query i.
template <class Search>
Run run_log(size_t queries, size_t threads, Search&& search) {
  std::vector<double> ms(queries);
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < queries; i = next++) {
        const auto begin = Clock::now();
        search(i);
        ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {static_cast<double>(queries) / seconds, bench::percentile(ms, 50), bench::percentile(ms, 99)};
}

int run(int argc, char** argv) {
  Flags flags("usage: filter_bench [--gov2-docs 25205179] [--gov2-queries 1000] [--threads 16] [--modes or,and]");
  flags.value("gov2-docs", "25205179", "documents of the GOV2-like preset")
      .value("gov2-queries", "1000", "queries of the log")
      .value("threads", "0", "CPU threads and GPU client threads (0: one per core)")
      .value("k", "10", "hits a query")
      .boolean("no-gpu", "the CPU alone");
  flags.parse(argc, argv);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  synthetic::Gov2Params params;
  params.documents = static_cast<uint32_t>(flags.count("gov2-docs"));
  params.queries = static_cast<uint32_t>(flags.count("gov2-queries"));
  const size_t threads = flags.count("threads") > 0 ? flags.count("threads") : std::thread::hardware_concurrency();
  const size_t k = flags.count("k");
  const auto made = Clock::now();
  synthetic::Gov2Collection c = synthetic::make_gov2_like(params);
  c.view.columns = generated_columns(params.documents, params.seed);
  std::printf(
      "GOV2-like preset: %u documents, %u queries (%.2f million postings a query on average), columns "
      "generated; %.0f s; %zu threads, k %zu\n\n",
      params.documents, params.queries, c.postings_per_query / 1e6,
      std::chrono::duration<double>(Clock::now() - made).count(), threads, k);
  const std::vector<std::pair<std::string, std::string>> filters = {
      {"none", ""},
      {"lang:l7 (selective)", "lang:l7"},
      {"year>=1995 (broad)", "year>=1995"},
      {"(lang:l0 OR lang:l1) AND year>=2010", "(lang:l0 OR lang:l1) AND year>=2010"}};

  // The filters' evaluation alone: the documents allowed, then the constraint the processors take.
  std::printf(
      "| filter | documents allowed | evaluated (filter_bits) ms | from the cache (constraint_docs) ms |\n"
      "|---|---|---|---|\n");
  for (const auto& [name, text] : filters) {
    if (text.empty()) continue;
    Query query({"x"}, QueryMode::kOr, k);
    query.filter = std::make_shared<const FilterNode>(parse_filter(text));
    size_t allowed = 0;
    for (uint64_t word : filter_bits(*query.filter, c.view.columns.get(), c.view.doc_count()))
      allowed += static_cast<size_t>(std::popcount(word));
    const double bits_s = bench::median_seconds_per_call(
        [&] { filter_bits(*query.filter, c.view.columns.get(), c.view.doc_count()); }, 3, 0.2);
    const double docs_s = bench::median_seconds_per_call([&] { constraint_docs(query, c.view); }, 3, 0.2);
    std::printf("| `%s` | %.1f%% | %.2f | %.2f |\n", text.c_str(), 100.0 * allowed / c.view.doc_count(), bits_s * 1e3,
                docs_s * 1e3);
  }
  std::fflush(stdout);

  // The log in `mode` under the filter `text` (none: empty), one filter shared by every query.
  const auto with_filter = [&](QueryMode mode, const std::string& text) {
    const auto filter = text.empty() ? nullptr : std::make_shared<const FilterNode>(parse_filter(text));
    std::vector<Query> queries;
    for (const auto& terms : c.queries) {
      queries.emplace_back(terms, mode, k);
      queries.back().filter = filter;
    }
    return queries;
  };
  CpuQueryProcessor cpu(c.view);
  std::string why;
  const bool gpu_here = !flags.is_set("no-gpu") && gpu::gpu_available(&why);
#ifdef WARP_HAVE_CUDA
  std::unique_ptr<gpu::GpuQueryProcessor> gpu_lanes;
  if (gpu_here) {
    gpu::GpuProcessorOptions options;
    options.lanes = 8;
    gpu_lanes = std::make_unique<gpu::GpuQueryProcessor>(c.view, options);
  }
#endif
  std::printf(
      "\n| mode | filter | CPU q/s | CPU p50 / p99 ms | GPU lanes q/s | GPU p50 / p99 ms | GPU = CPU |\n"
      "|---|---|---|---|---|---|---|\n");
  int differ = 0;
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd}) {
    for (const auto& [name, text] : filters) {
      const std::vector<Query> queries = with_filter(mode, text);
      std::vector<QueryResult> cpu_answers(queries.size());
      const Run on_cpu = run_log(queries.size(), threads, [&](size_t i) { cpu_answers[i] = cpu.search(queries[i]); });
      std::string gpu_cells = "| – | – | " + std::string(gpu_here ? "" : why.empty() ? "no GPU" : "no GPU");
#ifdef WARP_HAVE_CUDA
      if (gpu_lanes) {
        std::vector<QueryResult> gpu_answers(queries.size());
        const Run on_gpu =
            run_log(queries.size(), threads, [&](size_t i) { gpu_answers[i] = gpu_lanes->search(queries[i]); });
        size_t same = 0;
        for (size_t i = 0; i < queries.size(); ++i) {
          bool equal = cpu_answers[i].hits.size() == gpu_answers[i].hits.size();
          for (size_t h = 0; equal && h < cpu_answers[i].hits.size(); ++h)
            equal = cpu_answers[i].hits[h].doc == gpu_answers[i].hits[h].doc &&
                    cpu_answers[i].hits[h].score == gpu_answers[i].hits[h].score;
          same += equal;
        }
        differ += static_cast<int>(queries.size() - same);
        char cells[160];
        std::snprintf(cells, sizeof cells, "| %.0f | %.2f / %.2f | %zu/%zu", on_gpu.qps, on_gpu.p50_ms, on_gpu.p99_ms,
                      same, queries.size());
        gpu_cells = cells;
      }
#endif
      std::printf("| %s | %s | %.0f | %.2f / %.2f %s |\n", std::string(to_string(mode)).c_str(), name.c_str(),
                  on_cpu.qps, on_cpu.p50_ms, on_cpu.p99_ms, gpu_cells.c_str());
      std::fflush(stdout);
    }
  }

  // Facets: the leaf's pass over each query's lists and the matching documents' values, on the CPU.
  std::printf(
      "\n| mode | filter | facets (lang, year) q/s | p50 / p99 ms | matching documents, median |\n"
      "|---|---|---|---|---|\n");
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd}) {
    for (const auto& [name, text] : filters) {
      const std::vector<Query> queries = with_filter(mode, text);
      std::vector<double> matches(queries.size());
      const Run facets = run_log(queries.size(), threads, [&](size_t i) {
        FacetCounter counter({"lang", "year"}, UINT64_MAX);
        counter.count(queries[i], mode == QueryMode::kOr, c.view, {});
        matches[i] = static_cast<double>(counter.take(10).matches);
      });
      std::printf("| %s | %s | %.0f | %.2f / %.2f | %.0f |\n", std::string(to_string(mode)).c_str(), name.c_str(),
                  facets.qps, facets.p50_ms, facets.p99_ms, bench::percentile(matches, 50));
      std::fflush(stdout);
    }
  }
  if (differ > 0) std::printf("\nDIFFER: %d GPU answers are not the CPU's\n", differ);
  return differ > 0 ? 1 : 0;
}

}  // namespace
}  // namespace warp

int main(int argc, char** argv) {
  try {
    return warp::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "filter_bench: %s\n", e.what());
    return 2;
  }
}
