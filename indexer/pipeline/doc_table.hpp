// The documents of an out-of-core build, in the order threads finish reading them, and their
// final docIDs. Threads read splits in parallel and register their documents chunk by chunk;
// each chunk gets a block of provisional ids (dense, in registration order), its records (id,
// title, url, stored form) go to a spill file and only 16 bytes per document stay in memory (length, distinct
// terms, a 64-bit hash of the external id). When reading ends, finish() orders the chunks by
// input position (split, then chunk within it), resolves duplicate ids (the last in input order
// wins; equal hashes are checked against the ids themselves) and maps every provisional id to its
// final docID: the same docIDs whatever the thread count or timing.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"
#include "indexer/reader/document_reader.hpp"

namespace warp::pipeline {

inline constexpr DocId kDropped = kEndDoc;  // a provisional id whose document was replaced

class DocTable {
 public:
  // `store`: each document's stored form (stored_source.hpp) is spilled with its record, for the
  // partitions' stored family. Throws Error when the file cannot be created.
  explicit DocTable(std::string spill_path, bool store = true);
  ~DocTable();
  DocTable(const DocTable&) = delete;
  DocTable& operator=(const DocTable&) = delete;

  // Thread-safe. The `seq`th chunk of split `split`: its documents (title, url and id kept, and
  // with `store` the stored form; the body only as part of that). Returns the first of their provisional ids, taken
  // before the chunk is analyzed so that its postings carry them from the start.
  DocId add_chunk(size_t split, uint32_t seq, const std::vector<SourceDocument>& documents);
  // Thread-safe. The analyzed lengths and distinct terms of the chunk that starts at `first`.
  void set_counts(DocId first, const std::vector<uint32_t>& lengths, const std::vector<uint32_t>& distinct);
  // Thread-safe. A split read to its end: the lines it holds and its malformed records.
  void end_split(size_t split, uint64_t lines, std::vector<Rejection> rejections, uint64_t rejected);
  uint64_t documents() const;     // registered so far
  uint64_t memory_bytes() const;  // of the per-document arrays

  // After the last chunk: final docIDs, duplicates dropped. `splits` for the error places; the ids'
  // hashes are ordered on up to `threads` threads.
  void finish(const std::vector<InputSplit>& splits, ReadReport& report, size_t threads = 1);
  // By provisional id: the final docID, or kDropped.
  const std::vector<DocId>& final_ids() const { return final_of_; }
  uint64_t kept() const { return kept_; }
  // By split: the final docID of its first document (of the next split's, if it kept none).
  const std::vector<DocId>& split_starts() const { return split_starts_; }
  const std::vector<uint32_t>& lengths() const { return final_lengths_; }    // by final docID
  const std::vector<uint32_t>& distinct() const { return final_distinct_; }  // by final docID
  // Calls `visit` for every kept document of [begin, end) in docID order (one pass over the spill).
  void for_each_document(DocId begin, DocId end, const std::function<void(DocId, const DocumentRecord&)>& visit) const;
  void remove_spill();

 private:
  struct Chunk {
    size_t split;
    uint32_t seq;
    DocId first, count;     // provisional ids
    uint64_t offset;        // of its first record in the spill file
    DocId final_first = 0;  // final position before duplicates are dropped
  };
  struct SplitEnd {
    uint64_t lines = 0;
    std::vector<Rejection> rejections;
  };
  void read_records(const Chunk& chunk, const std::function<void(DocId provisional, DocumentRecord&)>& visit) const;

  std::string spill_path_;
  bool store_ = true;
  std::FILE* spill_ = nullptr;
  uint64_t spill_bytes_ = 0;
  mutable std::mutex mutex_;
  std::vector<Chunk> chunks_;                 // by first provisional id; sorted by input order in finish()
  std::vector<uint32_t> lengths_, distinct_;  // by provisional id
  std::vector<uint64_t> id_hashes_;
  std::vector<SplitEnd> split_ends_;  // by split
  uint64_t rejected_ = 0;
  std::vector<DocId> final_of_;
  std::vector<DocId> split_starts_;
  std::vector<uint32_t> final_lengths_, final_distinct_;
  uint64_t kept_ = 0;
};

}  // namespace warp::pipeline
