// index_bench: indexing throughput (MB/s and documents/s of raw input) and peak memory of
// `warp-indexer build --threads N` for each N of --threads, side by side with Xapian indexing the
// same documents (TermGenerator, English stemming: parse + stem + index, like ours; single-threaded,
// on the corpora no larger than --xapian-max-mb), each run in its own process so its peak RSS is its
// own: the command line's whole run, the CUDA context's creation included where the GPU is used.
// --csv writes the rows for tests/bench/plot_index_scaling.py.
// usage: index_bench --indexer build/indexer/warp-indexer --corpus FILE.jsonl [--corpus ...]
//                    [--threads 1,2] [--gpu-indexers 0,1] [--gpu-analysis] [--budget-mb 2048]
//                    [--xapian-max-mb 500] [--csv FILE]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xapian.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/util/flags.hpp"
#include "indexer/reader/document_reader.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Run {
  double seconds = 0;
  double peak_mb = 0;
  bool ok = false;
};

// Runs `child` in a forked process; wall time and the child's peak resident memory.
template <class Child>
Run in_child(Child&& child) {
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {std::chrono::duration<double>(Clock::now() - start).count(), usage.ru_maxrss / 1024.0,
          WIFEXITED(status) && WEXITSTATUS(status) == 0};
}

int xapian_index(const std::string& corpus, const std::string& db_path) {
  try {
    Xapian::WritableDatabase db(db_path, Xapian::DB_CREATE_OR_OVERWRITE);
    Xapian::TermGenerator generator;
    generator.set_stemmer(Xapian::Stem("english"));
    warp::DocumentStream stream({corpus});
    warp::SourceDocument doc;
    while (stream.next(doc)) {
      Xapian::Document xdoc;
      generator.set_document(xdoc);
      generator.index_text(doc.title);
      generator.index_text(doc.body);
      xdoc.add_boolean_term("Q" + doc.external_id);
      db.replace_document("Q" + doc.external_id, xdoc);
    }
    db.commit();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xapian: %s\n", e.what());
    return 1;
  } catch (const Xapian::Error& e) {
    std::fprintf(stderr, "xapian: %s\n", e.get_description().c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  warp::Flags flags("usage: index_bench --indexer PATH --corpus FILE.jsonl [--corpus ...]");
  flags.value("indexer", "build/indexer/warp-indexer", "the warp-indexer binary")
      .value("corpus", "", "JSONL corpus (repeatable)", true)
      .value("work", "/tmp/warp-index-bench", "scratch directory")
      .value("threads", "1,2", "warp-indexer --threads values, comma-separated")
      .value("gpu-indexers", "0", "warp-indexer --gpu-indexers values, comma-separated (0: CPU indexers only)")
      .boolean(
          "gpu-analysis",
          "every warp-indexer build with --gpu-analysis (the parsers' analysis on the GPU; engine warp+gpu-analysis)")
      .value("budget-mb", "2048", "warp-indexer --memory-budget")
      .value("partitions", "4", "warp-indexer --partitions")
      .value("xapian-max-mb", "500", "run Xapian only on corpora up to this size (it indexes at about 1.5 MB/s)")
      .value("csv", "", "also write corpus,engine,threads,seconds,mb_per_s,peak_rss_mb rows here");
  try {
    flags.parse(argc, argv);
    if (flags.help_requested() || flags.all("corpus").empty()) return std::printf("%s", flags.help_text().c_str()), 0;
    const fs::path work = flags.get("work");
    std::vector<std::string> thread_counts;
    const auto split_list = [](const std::string& list) {
      std::vector<std::string> values;
      for (size_t start = 0, end; start < list.size(); start = end + 1) {
        end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        values.push_back(list.substr(start, end - start));
      }
      return values;
    };
    thread_counts = split_list(flags.get("threads"));
    const std::vector<std::string> gpu_counts = split_list(flags.get("gpu-indexers"));
    const bool gpu_analysis = flags.is_set("gpu-analysis");
    bool failed = false;
    std::FILE* csv = flags.get("csv").empty() ? nullptr : std::fopen(flags.get("csv").c_str(), "w");
    if (csv != nullptr) std::fprintf(csv, "corpus,engine,threads,seconds,mb_per_s,peak_rss_mb\n");
    std::printf(
        "| corpus | MB | documents | engine | threads | seconds | MB/s | documents/s | peak RSS MB | warp/xapian |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& corpus : flags.all("corpus")) {
      warp::ReadReport report;
      uint64_t documents = 0;
      {
        warp::DocumentStream stream({corpus});
        warp::SourceDocument doc;
        while (stream.next(doc)) ++documents;
      }
      const double mb = fs::file_size(corpus) / 1e6;
      const auto row = [&](const char* engine, const char* threads, const Run& run, double ratio) {
        std::printf("| %s | %.0f | %llu | %s | %s | %.1f | %.1f | %.0f | %.0f | %s |\n",
                    fs::path(corpus).filename().c_str(), mb, static_cast<unsigned long long>(documents), engine,
                    threads, run.seconds, mb / run.seconds, documents / run.seconds, run.peak_mb,
                    ratio > 0 ? (std::to_string(ratio).substr(0, 4) + "×").c_str() : "");
        std::fflush(stdout);
        if (csv != nullptr) {
          std::fprintf(csv, "%s,%s,%s,%.3f,%.2f,%.1f\n", fs::path(corpus).filename().c_str(), engine, threads,
                       run.seconds, mb / run.seconds, run.peak_mb);
          std::fflush(csv);
        }
      };
      fs::remove_all(work);
      fs::create_directories(work);
      const bool with_xapian = mb <= flags.number("xapian-max-mb");
      const Run xapian =
          with_xapian ? in_child([&] { return xapian_index(corpus, (work / "xapian").string()); }) : Run{};
      fs::remove_all(work / "xapian");
      for (const std::string& gpus : gpu_counts) {
        for (const std::string& threads : thread_counts) {
          fs::remove_all(work / "warp");
          const std::string indexer = flags.get("indexer"), out = (work / "warp").string(),
                            budget = flags.get("budget-mb"), partitions = flags.get("partitions");
          const Run warp = in_child([&] {
            execl(indexer.c_str(), indexer.c_str(), "build", "--input", corpus.c_str(), "--out", out.c_str(),
                  "--threads", threads.c_str(), "--memory-budget", budget.c_str(), "--partitions", partitions.c_str(),
                  "--gpu-indexers", gpus.c_str(), "--quiet",
                  gpu_analysis ? "--gpu-analysis" : static_cast<char*>(nullptr), static_cast<char*>(nullptr));
            return 127;
          });
          std::string engine = gpus == "0" ? "warp" : "warp+" + gpus + "gpu";
          if (gpu_analysis) engine += "+gpu-analysis";
          if (!warp.ok) {  // no row: a failed build's seconds are not a throughput
            std::fprintf(stderr, "index_bench: warp-indexer (%s, %s threads) failed on %s\n", engine.c_str(),
                         threads.c_str(), corpus.c_str());
            failed = true;
            continue;
          }
          row(engine.c_str(), threads.c_str(), warp, with_xapian && xapian.ok ? xapian.seconds / warp.seconds : 0);
        }
      }
      if (with_xapian && !xapian.ok) {
        std::fprintf(stderr, "index_bench: xapian failed on %s\n", corpus.c_str());
        failed = true;
      } else if (with_xapian) {
        row("xapian", "1", xapian, 0);
      }
      fs::remove_all(work);
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "index_bench: %s\n", e.what());
    return 1;
  }
}
