// The peer side of the writes benchmark (live_writes_bench.sh): Xapian's writable database fed the
// same documents at the same rates as the cluster, each batch replaced by id and committed (Xapian
// syncs its files at commit: the batch is durable, as an acknowledged write of ours), then a
// reader reopened and searched for the batch's last document (Xapian's reader sees a commit once
// reopened). One process, one writer: Xapian's model. The database first holds the whole corpus,
// as the cluster's first generation does.
//   phases: RATE documents/s for SECONDS each (batches every 10 ms), then as fast as one writer
//   goes with batches of 1,000; a Markdown row each: documents, acknowledged/s, commit p50/p99
//   (request to durable), visible p50/p99 (durable to found by a reopened reader).
#include <xapian.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/util/flags.hpp"
#include "common/util/status.hpp"
#include "indexer/reader/document_reader.hpp"

namespace {
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())))];
}

class Writer {
 public:
  Writer(const std::string& path, std::vector<warp::SourceDocument> corpus)
      : db_(path, Xapian::DB_CREATE_OR_OVERWRITE), corpus_(std::move(corpus)) {
    generator_.set_stemmer(Xapian::Stem("english"));
  }
  void add(const warp::SourceDocument& doc, const std::string& id, const std::string& extra) {
    Xapian::Document xdoc;
    generator_.set_document(xdoc);
    generator_.index_text(doc.title);
    generator_.index_text(doc.body + extra);
    xdoc.add_boolean_term("Q" + id);
    db_.replace_document("Q" + id, xdoc);
  }
  void load_corpus() {
    for (const warp::SourceDocument& doc : corpus_) add(doc, doc.external_id, "");
    db_.commit();
  }
  // The next `n` documents written ("live-N", the corpus's text and a term of its own, zqNq, as
  // live_writes_load.py makes them), committed. Returns the last one's number.
  uint64_t batch(size_t n) {
    for (size_t i = 0; i < n; ++i, ++next_) {
      const warp::SourceDocument& doc = corpus_[next_ % corpus_.size()];
      add(doc, "live-" + std::to_string(next_), " zq" + std::to_string(next_) + "q");
    }
    db_.commit();
    return next_ - 1;
  }

 private:
  Xapian::WritableDatabase db_;
  Xapian::TermGenerator generator_;
  std::vector<warp::SourceDocument> corpus_;
  uint64_t next_ = 0;
};

struct Phase {
  std::string name;
  size_t per_batch = 0;
  double interval_ms = 0;  // 0: as fast as it goes
};

void run_phase(Writer& writer, Xapian::Database& reader, const Phase& phase, double seconds) {
  std::vector<double> commit_ms, visible_ms;
  uint64_t documents = 0;
  const auto start = Clock::now();
  Clock::time_point last_probe = start - std::chrono::seconds(1);
  for (size_t batches = 0; ms_since(start) < seconds * 1000; ++batches) {
    const auto sent = Clock::now();
    const uint64_t last = writer.batch(phase.per_batch);
    commit_ms.push_back(ms_since(sent));
    documents += phase.per_batch;
    if (Clock::now() - last_probe >= std::chrono::milliseconds(50)) {  // every 50 ms, as the cluster's prober
      last_probe = Clock::now();
      const auto durable = Clock::now();
      for (;;) {
        reader.reopen();
        Xapian::Enquire enquire(reader);
        enquire.set_query(Xapian::Query("zq" + std::to_string(last) + "q"));
        if (enquire.get_mset(0, 1).size() == 1) break;
      }
      visible_ms.push_back(ms_since(durable));
    }
    if (phase.interval_ms > 0) {
      const auto due = start + std::chrono::duration<double, std::milli>(phase.interval_ms * (batches + 1));
      std::this_thread::sleep_until(std::chrono::time_point_cast<Clock::duration>(due));
    }
  }
  const double elapsed = ms_since(start) / 1000;
  std::printf("| %s | %llu | %.0f | %.1f | %.1f | %.2f | %.2f | %zu |\n", phase.name.c_str(),
              static_cast<unsigned long long>(documents), static_cast<double>(documents) / elapsed,
              quantile(commit_ms, 0.5), quantile(commit_ms, 0.99), quantile(visible_ms, 0.5),
              quantile(visible_ms, 0.99), visible_ms.size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  warp::Flags flags("usage: xapian_writes --corpus FILE.jsonl --work DIR [--seconds 20]");
  flags.value("corpus", "", "the documents (JSONL), as the cluster's inputs")
      .value("work", "", "a directory for the database (made, and left for inspection)")
      .value("seconds", "20", "seconds each phase runs");
  try {
    flags.parse(argc, argv, 1);
    if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
    if (flags.get("corpus").empty() || flags.get("work").empty()) throw warp::Error(flags.help_text());
    std::vector<warp::SourceDocument> corpus;
    warp::DocumentStream stream({flags.get("corpus")});
    for (warp::SourceDocument doc; stream.next(doc);) corpus.push_back(doc);
    const fs::path path = fs::path(flags.get("work")) / "xapian-writes";
    fs::create_directories(path.parent_path());
    Writer writer(path.string(), corpus);
    const auto start = Clock::now();
    writer.load_corpus();
    std::fprintf(stderr, "xapian_writes: %zu corpus documents indexed and committed in %.1f s\n", corpus.size(),
                 ms_since(start) / 1000);
    Xapian::Database reader(path.string());
    const double seconds = flags.number("seconds");
    std::printf(
        "| phase | documents | acknowledged/s | commit p50 ms | commit p99 ms | visible p50 ms | "
        "visible p99 ms | probes |\n|---|---|---|---|---|---|---|---|\n");
    for (const Phase& phase : {Phase{"1000 documents/s", 10, 10}, Phase{"10000 documents/s", 100, 10},
                               Phase{"as fast as one writer goes (batches of 1,000)", 1000, 0}})
      run_phase(writer, reader, phase, seconds);
    return 0;
  } catch (const Xapian::Error& e) {
    std::fprintf(stderr, "xapian_writes: %s\n", e.get_description().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xapian_writes: %s\n", e.what());
  }
  return 1;
}
