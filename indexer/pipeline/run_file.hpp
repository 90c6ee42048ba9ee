// Sorted run files of the out-of-core build: an indexer thread writes the postings it holds as a
// run when its share of the memory budget is full, terms in bytewise order, each term's postings
// in docID order. Record: [u32 term bytes][term][u32 count][count × (u32 doc, u32 freq)]. A sparse
// index (a term and its offset every ~64 KiB) stays in memory, so the back end can split the term
// space into ranges of about equal bytes and start reading every run inside a range.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/index/posting_list.hpp"

namespace warp::pipeline {

// A term's first 8 bytes as a big-endian integer, zero-padded: integers compare as the texts'
// prefixes do (bytewise), and equal integers leave the texts to be compared. Runs are written and
// merged in this order.
inline uint64_t term_prefix(std::string_view term) {
  uint64_t key = 0;
  for (size_t b = 0; b < 8; ++b) key = key << 8 | (b < term.size() ? static_cast<unsigned char>(term[b]) : 0u);
  return key;
}

struct RunIndexEntry {
  std::string term;  // the first term of a record at `offset`
  uint64_t offset;
};

struct RunInfo {
  std::string path;
  uint64_t bytes = 0;
  std::vector<RunIndexEntry> index;  // ascending; the first entry is the first record
};

class RunWriter {
 public:
  explicit RunWriter(std::string path);  // throws Error when the file cannot be created
  ~RunWriter();
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;
  // Terms strictly ascending; postings by docID.
  void add(std::string_view term, std::span<const Posting> postings);
  RunInfo finish();  // flushes and closes; throws Error on a write error (disk full)

 private:
  // Records are copied into a buffer of the writer's own and written a megabyte at a time: a
  // record's four parts had been four fwrite calls, ~1 s of a 16-thread build's spills (a GPU
  // build's runs, whose postings come back from the device, write 1.5-2 million terms a parser).
  void write(const void* data, size_t size);
  void flush();
  RunInfo info_;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0;
  uint64_t next_sample_ = 0;
};

// Reads one run's records from the first term ≥ `from` on, with a buffer of at most `buffer_bytes`:
// no larger than the run's bytes from there to its first sample at or past `to` (when given, the
// end of the caller's range) and a little more, and not zeroed. At 16 threads the back end opens
// a cursor per run and term range (512 of them on 300 MB); buffers of the full size, zeroed, had
// been a third of that build's page faults and read twice the bytes the ranges held.
class RunCursor {
 public:
  RunCursor(const RunInfo& run, std::string_view from, size_t buffer_bytes, const std::string* to = nullptr);
  ~RunCursor();
  RunCursor(const RunCursor&) = delete;
  RunCursor& operator=(const RunCursor&) = delete;

  bool valid() const { return valid_; }
  const std::string& term() const { return term_; }
  // Appends the current record's postings to `out` and moves to the next record.
  void take(std::vector<Posting>& out);

 private:
  void read(void* data, size_t size);
  void skip(uint64_t size);
  bool next_header();
  const RunInfo& run_;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0, position_ = 0, filled_ = 0;
  uint64_t offset_ = 0;  // file offset of buffer_[filled_]
  bool valid_ = false;
  std::string term_;
  uint32_t count_ = 0;
};

}  // namespace warp::pipeline
