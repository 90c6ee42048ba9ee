// Final docID order for the back end's lists without merging them (parallel_builder.hpp):
// - SplitTaker hands the input's splits to the reader/parser threads so that each thread reads a
//   contiguous range of them front to back; a thread's documents are then consecutive final docIDs
//   and its runs' parts of a term are not interleaved with other threads'.
// - to_final_doc_order maps a term's postings from several runs to final docIDs and puts them in
//   docID order by cutting each run's part into pieces that lie in one span (a stretch of splits one
//   thread read in order) and copying the pieces by their first docID: one pass.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "common/index/posting_list.hpp"
#include "common/index/types.hpp"

namespace warp::pipeline {

// Each thread takes its own range's splits (about equal bytes) front to back, then the last split
// of the thread with the most bytes left, so the threads still finish within about one split of
// each other. Handing out the next split to whichever thread asked had interleaved every thread's
// parts at split granularity (256 splits at 16 threads), and merging them had been a fifth of the
// back end's CPU (RESULTS.md).
class SplitTaker {
 public:
  // `split_bytes`: the splits' sizes, in input order.
  SplitTaker(const std::vector<uint64_t>& split_bytes, size_t threads);
  // Thread-safe. The next split for `thread` to read; none when every split is taken.
  std::optional<size_t> next(size_t thread);
  // After reading: the first final docID of every span, ascending, from each split's first final
  // docID (DocTable::split_starts). A span is a stretch of splits that one thread read one after
  // another in order: its postings in any run are in docID order.
  std::vector<DocId> span_starts(const std::vector<DocId>& split_starts) const;

 private:
  static constexpr uint32_t kNotRead = UINT32_MAX;
  std::mutex mutex_;
  std::vector<uint64_t> bytes_before_;
  std::vector<size_t> front_, back_;      // per thread: the splits [front, back) of its range not yet taken
  std::vector<uint32_t> taken_;           // per thread
  std::vector<uint32_t> reader_, order_;  // per split: the thread that read it, its place in that thread's order
};

// A stretch of a run's postings of a term in docID order within one span: [begin, end) of the
// list, docIDs first..last.
struct ListPiece {
  DocId first, last;
  size_t begin, end;
};

// Provisional → final docIDs as blocks: a block is a stretch of provisional ids whose final ids
// are consecutive (a chunk, or the part of one between dropped documents), or a stretch of dropped
// ids. The ids are looked up in windows of 2^shift ids, about eight a block: a window's entry gives
// the delta (final − provisional) of the block it starts in and where that block ends, so an id
// maps with one load from a table of a few kilobytes and an add; ids past their window's first
// block (in about one window in eight) step through the blocks after it. Looked up by provisional id in the
// DocTable's array (2 MiB at 525,000 documents), the final id of a posting had been a cache miss:
// 41% of to_final_doc_order's samples on one load, 12% of the back end's at 16 threads on the H100
// host.
class FinalDocMap {
 public:
  // `final_of`: by provisional id, the final docID or kEndDoc (dropped).
  explicit FinalDocMap(std::span<const DocId> final_of);
  size_t blocks() const { return first_.size() - 1; }
  // `p` below the ids mapped: its final docID, or kEndDoc.
  DocId final_of(DocId p) const {
    const uint64_t entry = windows_[p >> shift_];
    if (p < static_cast<uint32_t>(entry)) [[likely]] return p + static_cast<DocId>(entry >> 32);
    size_t b = window_block_[p >> shift_];  // past the window's first block: the next ones
    while (first_[b + 1] <= p) ++b;
    return dropped_[b] ? kEndDoc : p + delta_[b];
  }

 private:
  std::vector<DocId> first_;  // by block, its first provisional id; one more: the end
  std::vector<DocId> delta_;  // by block; kEndDoc is a valid delta (p maps to p − 1)
  std::vector<uint8_t> dropped_;  // by block
  // By window: the delta of the block its first id is in << 32 | that block's end (the window's
  // first id where that block is dropped).
  std::vector<uint64_t> windows_;
  std::vector<uint32_t> window_block_;  // by window: the block its first id is in
  unsigned shift_ = 0;
};

// A term's postings from several runs, `segments` giving where each run's part starts (changed),
// to final docIDs (`final_of`: FinalDocMap of the provisional ids) in docID order,
// dropped documents left out. `span_starts` as SplitTaker gives them. Each part is cut where it
// enters another span or goes back in docID order; the pieces have disjoint docID ranges when a
// span's documents were read by one thread in order, and are then ordered by their first docID
// and copied. Pieces that overlap (no build makes them) are sorted as a whole instead: returns
// false then.
bool to_final_doc_order(std::vector<Posting>& list, std::vector<size_t>& segments, const FinalDocMap& final_of,
                        const std::vector<DocId>& span_starts, std::vector<Posting>& scratch, std::vector<ListPiece>& pieces);

}  // namespace warp::pipeline
