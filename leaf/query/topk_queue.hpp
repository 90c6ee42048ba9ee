// The k best (score, docID) pairs seen so far: higher score first, ties to the smaller docID.
// A min-heap on that order; would_enter() tells whether a score can still beat the worst kept hit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <vector>

#include "common/index/types.hpp"

namespace warp {

struct Hit {
  DocId doc;
  Score score;
};

// True when a ranks before b.
inline bool ranks_before(const Hit& a, const Hit& b) {
  return a.score > b.score || (a.score == b.score && a.doc < b.doc);
}

class TopkQueue {
 public:
  // `floor`: a score (in units, an integer-valued float) that the k-th best is known to reach
  // (or_floor): until k hits are in, only scores of at least `floor` enter, and bounds below it
  // prune as a full queue's threshold would. 0: none. The answer is the same; the work less.
  explicit TopkQueue(size_t k, Score floor = 0)
      : k_(k), floor_(floor), below_floor_(std::nextafter(floor, -std::numeric_limits<Score>::infinity())) {
    heap_.reserve(k + 1);
  }

  // Documents arrive in increasing docID order in DAAT, so a tie with the threshold never enters:
  // strictly greater is the exact test there. `insert` handles any order. Below k hits the floor
  // admits its ties (the k-th best may equal it): a bound enters when above the float just below
  // the floor, which is the floor or more (floor - 1/2 is not a float past 2^23, where scores may
  // reach: it rounded to the floor, and kept the floor's ties out).
  // (k = 0: nothing enters; the heap is empty, so its front is never read.)
  bool would_enter(Score upper_bound) const {
    if (heap_.size() < k_) return floor_ <= 0 || upper_bound > below_floor_;
    return !heap_.empty() && upper_bound > heap_.front().score;
  }
  // Whether a score must beat threshold() to enter (false while the queue is neither full nor
  // floored: any enters).
  bool full() const { return k_ > 0 && (heap_.size() >= k_ || floor_ > 0); }
  Score threshold() const { return heap_.size() >= k_ ? heap_.front().score : below_floor_; }  // only when full()

  // Documents that never enter (replaced or deleted since the generation: LiveOverlay::deleted),
  // by doc - doc_begin; checked only for a score that would enter, so it costs nothing otherwise.
  void mask(const uint8_t* deleted, DocId doc_begin) { deleted_ = deleted, deleted_begin_ = doc_begin; }
  // And those a query's constraints keep out (query_constraints.hpp): a bit each, doc - doc_begin.
  void mask_bits(const uint64_t* kept_out, DocId doc_begin) { kept_out_ = kept_out, kept_out_begin_ = doc_begin; }
  bool masked(DocId doc) const {
    if (deleted_ != nullptr && deleted_[doc - deleted_begin_] != 0) return true;
    if (kept_out_ == nullptr) return false;
    const DocId d = doc - kept_out_begin_;
    return (kept_out_[d / 64] >> (d % 64)) & 1;
  }

  bool insert(Score score, DocId doc) {
    const Hit hit{doc, score};
    if (masked(doc)) return false;
    if (heap_.size() < k_) {
      if (floor_ > 0 && score < floor_) return false;
      heap_.push_back(hit);
      std::push_heap(heap_.begin(), heap_.end(), ranks_before);
      return true;
    }
    if (k_ == 0 || !ranks_before(hit, heap_.front())) return false;
    std::pop_heap(heap_.begin(), heap_.end(), ranks_before);
    heap_.back() = hit;
    std::push_heap(heap_.begin(), heap_.end(), ranks_before);
    return true;
  }

  size_t size() const { return heap_.size(); }

  // The hits, best first; leaves the queue empty.
  std::vector<Hit> take_sorted() {
    std::sort(heap_.begin(), heap_.end(), ranks_before);
    return std::move(heap_);
  }

 private:
  size_t k_;
  Score floor_, below_floor_;
  std::vector<Hit> heap_;  // heap_.front() is the worst kept hit
  const uint8_t* deleted_ = nullptr;
  DocId deleted_begin_ = 0;
  const uint64_t* kept_out_ = nullptr;
  DocId kept_out_begin_ = 0;
};

// Merges per-partition top-k lists into the global top-k (same order rule).
std::vector<Hit> merge_topk(std::vector<std::vector<Hit>> lists, size_t k);

}  // namespace warp
