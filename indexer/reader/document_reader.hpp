// Reads source documents, streaming, from JSONL ({"id","title","body","url"?} per line), TREC SGML
// (<DOC><DOCNO>…</DOCNO>…</DOC>) and WARC (plain or gzip) files and directories. The format comes
// from the file name (.jsonl, .trec/.sgml/.trectext, .warc/.warc.gz), else from the first bytes.
// A malformed record is skipped, counted and reported with its file and line (JSONL, TREC) or byte
// offset (WARC): never fatal, never silently lost. Duplicate ids: the last one wins; the replaced
// document is counted (read_documents drops it; the pipeline marks it deleted).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"

namespace warp {

struct ReadReport {
  uint64_t documents = 0;           // accepted (after replacing duplicates)
  uint64_t rejected = 0;            // malformed records skipped
  uint64_t replaced = 0;            // earlier documents replaced by a later one with the same id
  uint64_t bytes = 0;               // input bytes consumed (uncompressed)
  std::vector<std::string> errors;  // "file:line: reason" or "file@offset: reason", the first 100

  void reject(const std::string& where, const std::string& why) {
    ++rejected;
    if (errors.size() < 100) errors.push_back(where + ": " + why);
  }
};

enum class InputFormat { kJsonl, kTrec, kWarc };

// Expands directories (recursively, files with a known extension, in name order) into files.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths);
InputFormat detect_format(const std::string& path);  // throws Error if the file cannot be read

// A piece of the input that one thread reads: a whole file or, for an uncompressed JSONL or TREC
// file larger than the split size, a byte range; its records are those that start inside it
// (a JSONL line, a TREC <DOC>), so the splits of a file hold each record exactly once, in order.
struct InputSplit {
  std::string path;
  InputFormat format = InputFormat::kJsonl;
  uint64_t begin = 0;
  uint64_t end = UINT64_MAX;
  size_t file = 0;  // index of the file among the inputs
};
// The splits of the files, in input order; gzip files and WARC files are read whole.
std::vector<InputSplit> plan_splits(const std::vector<std::string>& files, uint64_t split_bytes);

// A malformed record of a split: where (a line counted from the split's first line, or for WARC a
// byte offset in the file) and why. The lines before a split are read by other threads, so the
// caller turns split lines into file lines (SplitReader::lines of the earlier splits of the file).
struct Rejection {
  uint64_t line = 0;  // 0: located by `offset`
  uint64_t offset = 0;
  std::string why;
};

// Streams the documents of several files in order, record by record.
class DocumentStream {
 public:
  class FileReader;  // one per input format, private to document_reader.cpp

  explicit DocumentStream(const std::vector<std::string>& paths);  // throws Error on a missing input
  ~DocumentStream();
  // The next well-formed document; false at the end of the last file.
  bool next(SourceDocument& document);
  ReadReport& report() { return report_; }
  uint64_t total_file_bytes() const { return total_file_bytes_; }  // on disk, for an ETA

 private:
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::unique_ptr<FileReader> current_;
  ReadReport report_;
  uint64_t total_file_bytes_ = 0;
  uint64_t file_base_bytes_ = 0;
};

// Reads the documents of one split in order.
class SplitReader {
 public:
  explicit SplitReader(const InputSplit& split);  // throws Error when the file cannot be read
  ~SplitReader();
  bool next(SourceDocument& document);  // false at the end of the split, and ever after
  uint64_t lines() const;               // lines that start inside the split, read so far
  uint64_t bytes_read() const;          // uncompressed bytes consumed so far
  uint64_t rejected() const { return report_.rejected; }
  std::vector<Rejection>& rejections() { return rejections_; }

 private:
  uint64_t begin_;
  bool done_ = false;
  ReadReport report_;  // counts only; the rejections carry the places
  std::vector<Rejection> rejections_;
  std::unique_ptr<DocumentStream::FileReader> reader_;
};

// All documents of the inputs in memory, duplicates resolved (last wins). Calls `on_progress`
// every 20,000 documents.
std::vector<SourceDocument> read_documents(const std::vector<std::string>& paths, ReadReport& report,
                                           const std::function<void(const ReadReport&)>& on_progress = {});

}  // namespace warp
