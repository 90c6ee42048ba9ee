// The stored documents and the fetch phase, measured: what keeping stored forms costs a build (time
// and bytes, with and without --no-store), and what one hit of a page costs to fetch: its stored
// form read from RocksDB and its snippet built (single thread, per hit), against Xapian's
// Document::get_data() and MSet::snippet() on the same documents and queries (where Xapian is
// built in). Results: tests/bench/results/snippets.md.
//   fetch_bench --input FILE.jsonl [--partitions 4] [--runs 3] [--queries 300] [--work DIR]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "common/index/stored_source.hpp"
#include "common/util/flags.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/fetch/snippet.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "tests/bench/bench_util.hpp"
#ifdef WARP_HAVE_XAPIAN
#include <xapian.h>
#endif

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t dir_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) bytes += entry.file_size();
  return bytes;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct PerHit {
  std::vector<double> read_us, snippet_us;
  size_t hits = 0;
};

void print_row(const char* engine, const PerHit& p) {
  std::vector<double> total(p.read_us.size());
  for (size_t i = 0; i < total.size(); ++i) total[i] = p.read_us[i] + p.snippet_us[i];
  double mean = 0;
  for (double t : total) mean += t / static_cast<double>(total.size());
  std::printf("| %s | %zu | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.0f |\n", engine, p.hits,
              warp::bench::percentile(p.read_us, 50), warp::bench::percentile(p.read_us, 99),
              warp::bench::percentile(p.snippet_us, 50), warp::bench::percentile(p.snippet_us, 99),
              warp::bench::percentile(total, 50), warp::bench::percentile(total, 99), 1e6 / mean);
}

}  // namespace

int main(int argc, char** argv) {
  warp::Flags flags("fetch_bench --input FILE.jsonl [options]");
  flags.value("input", "", "documents (JSONL)")
      .value("partitions", "4", "partitions of the index")
      .value("runs", "3", "builds of each kind (the median is shown)")
      .value("queries", "300", "queries, drawn from the documents' titles")
      .value("length", "160", "snippet characters")
      .value("work", "", "scratch directory (default: a new one under /tmp)");
  flags.parse(argc, argv, 1);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  const std::string input = flags.get("input");
  const fs::path work = flags.get("work").empty()
                            ? fs::temp_directory_path() / ("fetch-bench-" + std::to_string(::getpid()))
                            : fs::path(flags.get("work"));
  fs::create_directories(work);
  const int runs = static_cast<int>(flags.count("runs"));

  // 1. Builds with and without stored forms.
  std::printf("input %s: %.1f MB\n\n", input.c_str(), static_cast<double>(fs::file_size(input)) / 1e6);
  std::printf("| build | seconds (median of %d) | index MB | of which stored MB |\n|---|---|---|---|\n", runs);
  std::map<bool, double> median_seconds, bytes;
  for (const bool store : {true, false}) {
    std::vector<double> seconds;
    for (int r = 0; r < runs; ++r) {
      warp::pipeline::PipelineOptions options;
      options.build.partitions = static_cast<uint32_t>(flags.count("partitions"));
      options.build.store = store;
      options.spill_dir = (work / "spill").string();
      const fs::path out = work / (store ? "stored" : "bare");
      fs::remove_all(out);
      warp::ReadReport read;
      const auto start = Clock::now();
      warp::pipeline::build_index({input}, options, out.string(), read);
      seconds.push_back(seconds_since(start));
      bytes[store] = static_cast<double>(dir_bytes(out));
    }
    median_seconds[store] = warp::bench::percentile(seconds, 50);
  }
  for (const bool store : {true, false}) {
    std::printf("| %s | %.2f | %.1f | %s |\n", store ? "stored (default)" : "--no-store", median_seconds[store],
                bytes[store] / 1e6,
                store ? std::to_string((bytes[true] - bytes[false]) / 1e6).substr(0, 5).c_str() : "0");
  }
  std::printf("\nstored forms: %.2f× the input's bytes; build time %.2f× --no-store's\n\n",
              (bytes[true] - bytes[false]) / static_cast<double>(fs::file_size(input)),
              median_seconds[true] / median_seconds[false]);

  // 2. The fetch of a page's hits: queries from random titles, the top 10 of each.
  warp::ReadReport report;
  const std::vector<warp::SourceDocument> documents = warp::read_documents({input}, report);
  std::mt19937_64 rng(42);
  warp::Analyzer analyzer;
  std::vector<std::string> texts;
  std::vector<std::vector<std::string>> queries;
  while (queries.size() < flags.count("queries")) {
    const std::string& title = documents[rng() % documents.size()].title;
    std::vector<std::string> terms = analyzer.analyze_query(title);
    if (terms.empty()) continue;
    texts.push_back(title);
    queries.push_back(std::move(terms));
  }
  const auto partitions = warp::open_index((work / "stored").string());
  std::vector<std::unique_ptr<warp::CpuQueryProcessor>> processors;
  for (const auto& partition : partitions)
    processors.push_back(std::make_unique<warp::CpuQueryProcessor>(partition->view()));
  warp::SnippetOptions options;
  options.length = flags.count("length");
  PerHit ours;
  for (const std::vector<std::string>& terms : queries) {
    std::vector<std::pair<float, std::pair<size_t, warp::DocId>>> hits;
    for (size_t p = 0; p < partitions.size(); ++p)
      for (const warp::Hit& hit : processors[p]->search({terms, warp::QueryMode::kOr, 10}).hits)
        hits.push_back({hit.score, {p, hit.doc}});
    std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    hits.resize(std::min<size_t>(hits.size(), 10));
    warp::SnippetTerms weights;
    for (const std::string& term : terms) weights[term] = 1.0;
    for (const auto& [score, where] : hits) {
      const auto start = Clock::now();
      const std::optional<std::string> source = partitions[where.first]->source(where.second);
      const auto read = Clock::now();
      const std::string snippet = warp::build_snippet(warp::source_field(source.value_or("{}"), "body").value_or(""),
                                                      weights, analyzer, options);
      ours.read_us.push_back(std::chrono::duration<double, std::micro>(read - start).count());
      ours.snippet_us.push_back(seconds_since(read) * 1e6);
      ++ours.hits;
    }
  }
  std::printf("per hit, one thread, %zu queries, top 10 each, %zu-character snippets of the body:\n\n", queries.size(),
              options.length);
  std::printf(
      "| engine | hits | stored read µs p50 / p99 | snippet µs p50 / p99 | both µs p50 / p99 | hits/s |\n"
      "|---|---|---|---|---|---|\n");
  print_row("Warpsearch (RocksDB stored family, build_snippet)", ours);

#ifdef WARP_HAVE_XAPIAN
  // 3. Xapian: the same documents (title and body indexed, stemmed; the body as the document's
  // data), the same query texts, MSet::snippet of the body.
  const std::string xapian_path = (work / "xapian").string();
  {
    Xapian::WritableDatabase db(xapian_path, Xapian::DB_CREATE_OR_OVERWRITE);
    Xapian::TermGenerator generator;
    generator.set_stemmer(Xapian::Stem("english"));
    generator.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
    for (const warp::SourceDocument& doc : documents) {
      Xapian::Document xdoc;
      generator.set_document(xdoc);
      generator.index_text(doc.title);
      generator.index_text(doc.body);
      xdoc.set_data(doc.body);
      db.add_document(xdoc);
    }
    db.commit();
  }
  Xapian::Database db(xapian_path);
  Xapian::QueryParser parser;
  const Xapian::Stem stemmer("english");
  parser.set_stemmer(stemmer);
  parser.set_stemming_strategy(Xapian::QueryParser::STEM_ALL);
  parser.set_default_op(Xapian::Query::OP_OR);
  PerHit theirs;
  for (const std::string& text : texts) {
    Xapian::Enquire enquire(db);
    enquire.set_query(parser.parse_query(text));
    const Xapian::MSet mset = enquire.get_mset(0, 10);
    for (auto it = mset.begin(); it != mset.end(); ++it) {
      const auto start = Clock::now();
      const std::string data = it.get_document().get_data();
      const auto read = Clock::now();
      const std::string snippet =
          mset.snippet(data, options.length, stemmer,
                       Xapian::MSet::SNIPPET_BACKGROUND_MODEL | Xapian::MSet::SNIPPET_EXHAUSTIVE, "<em>", "</em>", "…");
      theirs.read_us.push_back(std::chrono::duration<double, std::micro>(read - start).count());
      theirs.snippet_us.push_back(seconds_since(read) * 1e6);
      ++theirs.hits;
    }
  }
  print_row("Xapian (get_data, MSet::snippet)", theirs);
#endif
  fs::remove_all(work);
  return 0;
}
