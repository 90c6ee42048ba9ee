// Word positions and phrases against Xapian's OP_PHRASE, side by side on one core, on the same
// documents with the same terms at the same positions (our analyzer's; Xapian indexes them with
// add_posting). Per collection: what positions cost the build (time and bytes a position), how fast
// a row decodes, and for phrases of 2 and 3 words drawn from the documents: the matching documents
// (ours phrase_docs, Xapian an unranked match of every document), checked equal, and the ranked top
// 10 (ours: a phrased OR query on the CPU processor, BM25 of the words; Xapian: OP_PHRASE under BM25),
// both read from disk (our partition opened as a leaf opens it).
// usage: phrase_bench DOCS.jsonl... (tests/data/cranfield/docs.jsonl tests/data/cisi/docs.jsonl)
#include <unistd.h>
#include <xapian.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include "common/index/index_builder.hpp"
#include "common/index/partition_store.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/phrase_docs.hpp"
#include "tests/bench/bench_util.hpp"

namespace {
using namespace warp;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Analyzed {
  std::vector<std::string> title, body;
};

void run(const std::string& input) {
  ReadReport report;
  const std::vector<SourceDocument> documents = read_documents({input}, report);
  Analyzer analyzer;
  std::vector<Analyzed> analyzed;
  for (const SourceDocument& doc : documents)
    analyzed.push_back({analyzer.analyze(doc.title), analyzer.analyze(doc.body)});

  // The build with and without positions (the in-memory builder, one partition), median of 5.
  std::vector<BuiltPartition> built;
  double build_s[2];
  for (bool positions : {false, true}) {
    std::vector<double> times;
    for (int run = 0; run < 5; ++run) {
      BuildOptions options;
      options.positions = positions;
      options.store = false;
      const auto start = Clock::now();
      IndexBuilder builder(options);
      for (const SourceDocument& doc : documents) builder.add_document(doc);
      std::vector<BuiltPartition> parts = builder.build();
      times.push_back(seconds_since(start));
      if (positions) built = std::move(parts);
    }
    build_s[positions] = bench::percentile(times, 50);
  }
  const auto& stored = static_cast<const InMemoryPositions&>(*built.front().view.positions);
  // Searched as a leaf searches it: the partition written, then opened from disk (its positions'
  // rows read through RocksDB's block cache), as Xapian's database is read.
  const std::string partition_dir = "/tmp/phrase-bench-partition-" + std::to_string(::getpid());
  std::filesystem::remove_all(partition_dir);
  write_partition(built.front(), partition_dir);
  const std::unique_ptr<Partition> partition = open_partition(partition_dir);
  const IndexView& view = partition->view();
  uint64_t positions = 0, rows = 0;
  std::vector<std::pair<DocId, std::string>> all_rows;
  stored.for_each_row([&](std::string_view key, std::string_view row) {
    DocId chunk = 0;
    for (int i = 0; i < 4; ++i) chunk = chunk << 8 | static_cast<uint8_t>(key[i]);
    all_rows.emplace_back(chunk, std::string(row));
    positions += TermPositionsRow::parse(all_rows.back().second, chunk).position_count();
    ++rows;
  });
  PositionBlock block;
  const double decode_s = bench::median_seconds_per_call(
      [&] {
        for (const auto& [chunk, row] : all_rows) {
          const TermPositionsRow parsed = TermPositionsRow::parse(row, chunk);
          for (size_t b = 0; b < parsed.blocks(); ++b) {
            parsed.decode(b, block);
            for (size_t i = 0; i < block.docs.size(); ++i) block.of(i);
          }
        }
      },
      5, 0.2);

  // Xapian: the same terms at the same positions (the body after the title and a gap of one).
  const std::string path = "/tmp/phrase-bench-xapian-" + std::to_string(::getpid());
  double xapian_build_s = 0;
  {
    const auto start = Clock::now();
    Xapian::WritableDatabase db(path, Xapian::DB_CREATE_OR_OVERWRITE);
    for (const Analyzed& doc : analyzed) {
      Xapian::Document x;
      Xapian::termpos pos = 1;  // Xapian's positions start at 1
      for (const std::string& term : doc.title) x.add_posting(term, pos++);
      if (!doc.title.empty()) ++pos;
      for (const std::string& term : doc.body) x.add_posting(term, pos++);
      db.add_document(x);
    }
    db.commit();
    xapian_build_s = seconds_since(start);
  }
  Xapian::Database db(path);

  // Phrases drawn from the documents (seed fixed: the same phrases each run).
  std::mt19937_64 rng(42);
  CpuQueryProcessor cpu(view);
  std::printf(
      "\n%s: %zu documents, %llu positions in %llu rows, %.2f bytes a position (%.1f MB); "
      "build %.3f s without positions, %.3f s with (+%.0f%%; Xapian with positions %.3f s); "
      "rows decode at %.0f M positions/s\n",
      input.c_str(), documents.size(), static_cast<unsigned long long>(positions),
      static_cast<unsigned long long>(rows), static_cast<double>(stored.bytes()) / static_cast<double>(positions),
      static_cast<double>(stored.bytes()) / 1e6, build_s[0], build_s[1], 100 * (build_s[1] / build_s[0] - 1),
      xapian_build_s, static_cast<double>(positions) / decode_s / 1e6);
  std::printf(
      "| words | phrases | matching docs (mean) | ours: match us | Xapian: match us | ratio | ours: top 10 us | "
      "Xapian: top 10 us | ratio | differing sets |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t words : {2, 3}) {
    std::vector<std::vector<std::string>> phrases;
    while (phrases.size() < 500) {
      const Analyzed& doc = analyzed[rng() % analyzed.size()];
      if (doc.body.size() < words) continue;
      const size_t at = rng() % (doc.body.size() - words + 1);
      phrases.emplace_back(doc.body.begin() + static_cast<std::ptrdiff_t>(at),
                           doc.body.begin() + static_cast<std::ptrdiff_t>(at + words));
    }
    std::vector<double> ours_match, xapian_match, ours_top, xapian_top;
    uint64_t matched = 0, differing = 0;
    for (const std::vector<std::string>& phrase : phrases) {
      std::vector<DocId> ours;
      ours_match.push_back(bench::median_seconds_per_call([&] { ours = phrase_docs(phrase, view); }, 3, 0.002));
      const Xapian::Query query(Xapian::Query::OP_PHRASE, phrase.begin(), phrase.end(), phrase.size());
      std::set<DocId> theirs;
      xapian_match.push_back(bench::median_seconds_per_call(
          [&] {
            Xapian::Enquire enquire(db);
            enquire.set_query(query);
            enquire.set_weighting_scheme(Xapian::BoolWeight());
            enquire.set_docid_order(Xapian::Enquire::ASCENDING);
            const Xapian::MSet all = enquire.get_mset(0, db.get_doccount());
            theirs.clear();
            for (auto it = all.begin(); it != all.end(); ++it) theirs.insert(*it - 1);
          },
          3, 0.002));
      matched += ours.size();
      differing += std::set<DocId>(ours.begin(), ours.end()) != theirs;
      Query phrased(phrase, QueryMode::kOr, 10);
      phrased.phrases = {phrase};
      ours_top.push_back(bench::median_seconds_per_call([&] { cpu.search(prepare_query(phrased, view)); }, 3, 0.002));
      xapian_top.push_back(bench::median_seconds_per_call(
          [&] {
            Xapian::Enquire enquire(db);
            enquire.set_query(query);
            enquire.set_weighting_scheme(Xapian::BM25Weight());
            enquire.get_mset(0, 10);
          },
          3, 0.002));
    }
    const double om = bench::percentile(ours_match, 50) * 1e6, xm = bench::percentile(xapian_match, 50) * 1e6;
    const double ot = bench::percentile(ours_top, 50) * 1e6, xt = bench::percentile(xapian_top, 50) * 1e6;
    std::printf("| %zu | %zu | %.1f | %.1f | %.1f | %.1fx | %.1f | %.1f | %.1fx | %llu |\n", words, phrases.size(),
                static_cast<double>(matched) / static_cast<double>(phrases.size()), om, xm, xm / om, ot, xt, xt / ot,
                static_cast<unsigned long long>(differing));
  }
  std::filesystem::remove_all(path);
  std::filesystem::remove_all(partition_dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: phrase_bench DOCS.jsonl...\n");
    return 2;
  }
  std::printf("phrase_bench: medians over 500 phrases a row, each timed as the median of 3 runs (one core)\n");
  for (int i = 1; i < argc; ++i) run(argv[i]);
  return 0;
}
