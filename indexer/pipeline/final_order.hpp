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
// back end's CPU (tests/bench/results/indexing.md).
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

// A term's postings from several runs, `segments` giving where each run's part starts (changed),
// to final docIDs (`final_of`: by provisional id, kEndDoc for a dropped document) in docID order,
// dropped documents left out. `span_starts` as SplitTaker gives them. Each part is cut where it
// enters another span or goes back in docID order; the pieces have disjoint docID ranges when a
// span's documents were read by one thread in order, and are then ordered by their first docID
// and copied. Pieces that overlap (no build makes them) are sorted as a whole instead: returns
// false then.
bool to_final_doc_order(std::vector<Posting>& list, std::vector<size_t>& segments, std::span<const DocId> final_of,
                        const std::vector<DocId>& span_starts, std::vector<Posting>& scratch,
                        std::vector<ListPiece>& pieces);

}  // namespace warp::pipeline
