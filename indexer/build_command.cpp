#include "indexer/build_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "common/index/index_files.hpp"
#include "indexer/document_reader.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void print_rate(const char* stage, uint64_t documents, uint64_t bytes, double seconds, bool final_line) {
  const bool tty = isatty(STDERR_FILENO);
  const double s = seconds > 0 ? seconds : 1e-9;
  std::fprintf(stderr, "%s%s: %llu documents, %.1f MB in %.1f s (%.0f documents/s, %.1f MB/s)%s", tty ? "\r" : "",
               stage, static_cast<unsigned long long>(documents), bytes / 1e6, seconds, documents / s, bytes / 1e6 / s,
               (final_line || !tty) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

int run_build_command(const BuildCommandOptions& options) {
  const auto start = Clock::now();
  ReadReport report;
  auto last_print = start;
  std::vector<SourceDocument> documents = read_documents(options.inputs, report, [&](const ReadReport& r) {
    if (options.progress && Clock::now() - last_print > std::chrono::seconds(1)) {
      print_rate("reading", r.documents, r.bytes, seconds_since(start), false);
      last_print = Clock::now();
    }
  });
  if (options.progress) print_rate("read", report.documents, report.bytes, seconds_since(start), true);
  for (const std::string& error : report.errors) std::fprintf(stderr, "rejected %s\n", error.c_str());
  if (report.rejected > report.errors.size()) {
    std::fprintf(stderr, "... and %llu more rejected records\n",
                 static_cast<unsigned long long>(report.rejected - report.errors.size()));
  }
  if (documents.empty()) {
    std::fprintf(stderr, "error: no documents to index in %zu input(s)\n", options.inputs.size());
    return 1;
  }

  const auto index_start = Clock::now();
  IndexBuilder builder(options.build);
  uint64_t bytes = 0;
  last_print = index_start;
  for (const SourceDocument& doc : documents) {
    builder.add_document(doc);
    bytes += doc.title.size() + doc.body.size();
    if (options.progress && (builder.document_count() & 1023) == 0 && Clock::now() - last_print > std::chrono::seconds(1)) {
      print_rate("indexing", builder.document_count(), bytes, seconds_since(index_start), false);
      last_print = Clock::now();
    }
  }
  if (options.progress) print_rate("indexed", builder.document_count(), bytes, seconds_since(index_start), true);
  std::vector<BuiltPartition> partitions = builder.build();
  write_index(partitions, options.out_dir);

  uint64_t postings = 0, list_bytes = 0;
  for (const BuiltPartition& p : partitions) postings += p.view.meta.posting_count, list_bytes += p.view.postings.size() * 4;
  std::fprintf(stderr,
               "wrote %s: generation %llu, %zu partition(s), %llu documents, %llu postings, %.1f MB of lists "
               "(%s, %.2f bits/posting incl. frequencies and block metadata), %llu rejected, %llu replaced, %.1f s\n",
               options.out_dir.c_str(), static_cast<unsigned long long>(options.build.generation), partitions.size(),
               static_cast<unsigned long long>(report.documents), static_cast<unsigned long long>(postings),
               list_bytes / 1e6, options.build.codec.c_str(), postings ? list_bytes * 8.0 / postings : 0.0,
               static_cast<unsigned long long>(report.rejected), static_cast<unsigned long long>(report.replaced),
               seconds_since(start));
  return 0;
}

}  // namespace warp
