#include "indexer/build_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "indexer/reader/document_reader.hpp"
#include "indexer/pipeline/parallel_builder.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// "indexing: 61440 documents, 19.6 MB in 1.0 s (61340 documents/s, 19.6 MB/s, ETA 3 s)"
void print_progress(const char* stage, uint64_t documents, uint64_t bytes, uint64_t total_bytes, double seconds,
                    bool final_line) {
  const bool tty = isatty(STDERR_FILENO);
  const double s = seconds > 0 ? seconds : 1e-9;
  const double rate = bytes / s;
  char eta[48] = "";
  if (!final_line && total_bytes > bytes && rate > 0)
    std::snprintf(eta, sizeof eta, ", ETA %.0f s", (total_bytes - bytes) / rate);
  std::fprintf(stderr, "%s%s: %llu documents, %.1f MB in %.1f s (%.0f documents/s, %.1f MB/s%s)%s", tty ? "\r" : "",
               stage, static_cast<unsigned long long>(documents), bytes / 1e6, seconds, documents / s, rate / 1e6, eta,
               (final_line || !tty) ? "\n" : "");
  std::fflush(stderr);
}

// This process's peak resident memory in MiB (VmHWM: from exec on, unlike getrusage's ru_maxrss,
// which includes the parent's image before exec).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

}  // namespace

int run_build_command(const BuildCommandOptions& options) {
  const auto start = Clock::now();
  pipeline::PipelineOptions pipeline_options = options.pipeline;
  pipeline_options.build = options.build;
  if (pipeline_options.spill_dir.empty()) pipeline_options.spill_dir = options.out_dir + ".runs";
  ReadReport read;
  const pipeline::PipelineReport report = pipeline::build_index(
      options.inputs, pipeline_options, options.out_dir, read, [&](const pipeline::PipelineProgress& p) {
        if (options.progress)
          print_progress("indexing", p.documents, p.bytes, p.total_bytes, seconds_since(start), false);
      });
  if (options.progress)
    print_progress("indexed", read.documents + read.replaced, read.bytes, 0, seconds_since(start), true);
  for (const std::string& error : read.errors) std::fprintf(stderr, "rejected %s\n", error.c_str());
  if (read.rejected > read.errors.size()) {
    std::fprintf(stderr, "... and %llu more rejected records\n",
                 static_cast<unsigned long long>(read.rejected - read.errors.size()));
  }
  if (report.partitions.empty()) {
    std::fprintf(stderr, "error: no documents to index in %zu input(s)\n", options.inputs.size());
    return 1;
  }
  std::string gpu_line;
  if (options.pipeline.gpu_indexers > 0) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "; %zu GPU indexer(s), each a share of %.1f CPU indexers, %.1f s on the GPU, %llu batch(es) on the "
                  "CPU after a hash collision",
                  options.pipeline.gpu_indexers, report.gpu_speed, report.gpu_seconds,
                  static_cast<unsigned long long>(report.gpu_fallbacks));
    gpu_line = text;
  }
  if (options.pipeline.gpu_analysis && report.gpu_analysis_unused) {
    char text[240];
    if (report.gpu_analysis_bytes_per_parser < options.pipeline.gpu_analysis_min_bytes) {
      std::snprintf(text, sizeof text,
                    "; GPU analysis: not used (%.0f MiB of input a parser, under --gpu-analysis-min-mb %llu: its "
                    "start-up would cost more than it saves)",
                    static_cast<double>(report.gpu_analysis_bytes_per_parser) / (1 << 20),
                    static_cast<unsigned long long>(options.pipeline.gpu_analysis_min_bytes >> 20));
    } else {
      std::snprintf(text, sizeof text,
                    "; GPU analysis: not used (a memory budget under %llu MiB: the CUDA driver's memory would leave "
                    "the parsers' lists too little of it)",
                    static_cast<unsigned long long>(options.pipeline.gpu_analysis_min_budget >> 20));
    }
    gpu_line += text;
  } else if (options.pipeline.gpu_analysis) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "; GPU analysis: ready after %.2f-%.2f s, %llu documents (%llu more on the CPU before it was ready, "
                  "%llu for bytes "
                  "outside ASCII), %llu tokens, %llu missed by its table, %llu postings of the runs sorted on the GPU, "
                  "%.1f s in the "
                  "parsers' GPU calls",
                  report.gpu_analysis_ready_first, report.gpu_analysis_ready_last,
                  static_cast<unsigned long long>(report.gpu_analysis_documents),
                  static_cast<unsigned long long>(report.gpu_analysis_early_documents),
                  static_cast<unsigned long long>(report.gpu_analysis_cpu_documents),
                  static_cast<unsigned long long>(report.gpu_analysis_tokens),
                  static_cast<unsigned long long>(report.gpu_analysis_misses),
                  static_cast<unsigned long long>(report.gpu_analysis_run_postings), report.gpu_analysis_seconds);
    gpu_line += text;
    if (!report.gpu_analysis_failure.empty()) {
      gpu_line += "; the GPU analysis failed during the build (" + report.gpu_analysis_failure +
                  ") and the CPU analyzed the rest";
    }
  }
  uint64_t postings = 0, list_bytes = 0;
  for (const pipeline::BuiltSummary& p : report.partitions)
    postings += p.meta.posting_count, list_bytes += p.list_bytes;
  std::fprintf(
      stderr,
      "wrote %s: generation %llu, %zu partition(s), %llu documents, %llu postings, %.1f MB of lists "
      "(%s, %.2f bits/posting incl. frequencies and block metadata), %llu rejected, %llu replaced, "
      "%zu parser, %zu indexer%s and %zu back-end threads, %zu splits, %llu runs, %llu postings routed, stem cache "
      "%llu stems in %zu segment(s)%s, "
      "%.1f s (parse+index %.1f, docIDs %.1f, merge+encode %.1f, write %.1f), peak RSS %.0f MiB%s\n",
      options.out_dir.c_str(), static_cast<unsigned long long>(options.build.generation), report.partitions.size(),
      static_cast<unsigned long long>(read.documents), static_cast<unsigned long long>(postings), list_bytes / 1e6,
      options.build.codec.c_str(), postings ? list_bytes * 8.0 / postings : 0.0,
      static_cast<unsigned long long>(read.rejected), static_cast<unsigned long long>(read.replaced), report.parsers,
      report.indexers, report.parsers_index ? " threads (each parser indexes its own chunks)" : "",
      report.backend_threads, report.splits, static_cast<unsigned long long>(report.runs_written),
      static_cast<unsigned long long>(report.routed_postings), static_cast<unsigned long long>(report.stem_cache_stems),
      report.stem_cache_segments, report.stem_cache_frozen ? " (full)" : "", seconds_since(start), report.parse_seconds,
      report.merge_seconds, report.encode_seconds, report.write_seconds, peak_rss_mib(), gpu_line.c_str());
  return 0;
}

}  // namespace warp
