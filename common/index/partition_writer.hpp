// Writing a partition (the layout: partition_store.hpp). Two ways: write_partition from a partition
// built in memory, or streaming, for builds that never hold one: SstRows writes each column
// family's rows in key order into SST files, PartitionAssembly ingests them into a fresh database,
// and seal_partition lists every file with its size and CRC-32 in WARP-CHECKSUMS, last.
//
// Contracts: a partition directory is written once (every writer refuses an existing one); it is
// complete only once sealed, and a reader refuses one that is not; rows within a file are strictly
// ascending by key.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/index/index_builder.hpp"

namespace warp {

// REQUIRES: `dir` does not exist. Writes and seals the partition.
void write_partition(const BuiltPartition& partition, const std::string& dir);

// Streaming construction, for builds that never hold a partition in memory: the rows of the
// lexicon, postings and documents families are written in key order into SST files (one or more
// per family, over disjoint key ranges, e.g. one per term range built in parallel), then
// PartitionAssembly ingests them into a fresh database. write_partition uses the same pieces.
class SstRows {
 public:
  enum class Family { kMeta, kLexicon, kPostings, kDocuments, kStored, kPositions };
  // Postings go to two files: the lists shorter than the family's min_blob_size (`path`) and the
  // longer ones (`long_path`), which PartitionAssembly alone compacts, to move them to blob files.
  struct Done {
    std::string path;  // empty when no row was written (no file)
    uint32_t crc = 0;  // CRC-32 of the rows' keys and values, back to back, in order (lexicon and documents only)
    uint64_t bytes = 0, rows = 0;
    uint64_t value_bytes = 0;                   // of the values alone (postings: the lists' words × 4)
    std::string long_path;                      // postings: the long lists' file (empty: none)
    std::string long_first_key, long_last_key;  // of the long lists' rows
  };
  SstRows(Family family, std::string path);
  ~SstRows();
  SstRows(const SstRows&) = delete;
  SstRows& operator=(const SstRows&) = delete;

  void put(std::string_view key, std::string_view value);  // keys strictly ascending (bytewise)
  // A term's lexicon row (df, cf, list size, CRC of the list: crc32_of, then its best postings
  // where it has them: a count, kTermTops, and each posting's docID and frequency; then its rank
  // floors where it has best postings and rank floors: a count and each floor's float bits) and its
  // postings row (the encoded list, `count` words).
  void put_term(std::string_view term, const TermInfo& info, uint32_t list_crc, std::span<const Posting> tops = {},
                std::span<const Score> rank_floors = {});
  void put_list(std::string_view term, const uint32_t* words, uint32_t count);
  void put_document(DocId doc, const DocumentRecord& record);
  // kStored: the record's stored form (nothing where it has none).
  void put_stored(DocId doc, const DocumentRecord& record);
  Done finish();

 private:
  struct Writer;
  Family family_;
  std::string path_;
  std::unique_ptr<Writer> writer_;       // opened at the first row
  std::unique_ptr<Writer> long_writer_;  // postings: opened at the first long list
  Done done_;
};

// A partition put together from its families' SST files (SstRows) in `dir` (which may hold only
// those files). Each term range's lexicon and postings files are moved in, and its long lists moved
// to blob files (a compaction of that range's file alone), as soon as the range is written: a
// parallel build overlaps this with the encoding of the other ranges instead of doing it all after
// them (the write phase had scaled 3.3x at 16 threads). The moves run on `movers` threads of the
// assembly's own, so add_terms returns at once (with none, add_terms moves the files itself).
// finish() then waits for them, adds the meta rows and the documents and seals the partition.
// What a partition may hold beyond its lexicon, lists and documents.
struct PartitionExtras {
  std::vector<SstRows::Done> stored;     // kStored rows, in key order
  std::string columns;                   // the meta row of its columns (DocColumns::serialize); empty: none
  std::vector<SstRows::Done> positions;  // kPositions rows (word_positions.hpp), in key order
  std::vector<DocId> position_chunks;    // where their chunks begin; empty: no word positions kept
};

class PartitionAssembly {
 public:
  // Creates the database; refuses an existing one.
  explicit PartitionAssembly(std::string dir, size_t movers = 0);
  ~PartitionAssembly();
  PartitionAssembly(const PartitionAssembly&) = delete;
  PartitionAssembly& operator=(const PartitionAssembly&) = delete;
  // Thread-safe. One term range's files, their keys disjoint from every other range's. With movers,
  // returns at once; a move that failed is thrown by the next add_terms or by finish.
  void add_terms(const SstRows::Done& lexicon, const SstRows::Done& postings);
  // After the last add_terms. `meta.posting_count` set; `term_count`: lexicon rows; `lexicon`: the
  // ranges' lexicon parts in key order (the content checksum); `documents` in key order.
  void finish(const PartitionMeta& meta, uint64_t term_count, const std::vector<uint32_t>& doc_lengths,
              const std::vector<SstRows::Done>& lexicon, const std::vector<SstRows::Done>& documents,
              const PartitionExtras& extra = {});

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes DIR/WARP-CHECKSUMS for the files there now (write_partition calls it last), reading the
// files on up to `threads` threads; each file is synced before the list is written, the list and
// the directory after. Returns the files listed.
uint64_t seal_partition(const std::string& dir, size_t threads = 1);
// What DIR/WARP-CHECKSUMS lists: file name -> (size, CRC-32); empty if it cannot be read. Not a
// verification (open_partition does that): for a writer that has just sealed the partition and
// needs the same checksums again.
std::map<std::string, std::pair<uint64_t, uint32_t>> sealed_checksums(const std::string& dir);

}  // namespace warp
