// Postings of the shared stems routed between the parsers, each stem owned by one of them (its id
// modulo the parsers): a parser indexes its documents' postings of the stems it owns and hands the
// others to their owners, which index them between their own documents. Each parser's runs then
// hold its share of the vocabulary, not nearly all of it: where every parser kept every stem's
// list, sixteen parsers' runs held the vocabulary 32-44 times over, and their sorts, spills and
// the back end's merge of them were a third of the 16-thread build's extra CPU (tests/bench/results/indexing.md).
// Measured: 4-8% less CPU and 3-9% less peak memory at sixteen threads, the time within the spread
// between machine starts (tests/bench/results/indexing.md).
// A parser hands postings over in buffers (one per owner); an owner takes its inbox when it hands
// over its own, so no thread waits on another but where the inboxes hold more than their bound.
// An owner keeps a stem's postings from each parser apart (ParserIndexer::set_routing) and writes
// them parser by parser: as the parsers read consecutive ranges of the input, its runs' lists come
// in final docID order as one parser's did.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/index/types.hpp"

namespace warp::pipeline {

struct RoutedPosting {
  uint32_t stem;  // an id of the shared stem cache
  DocId doc;      // provisional
  TermFreq freq;
};

// Division and remainder of 32-bit ids by a constant d ≥ 2 fixed at run time, by multiplications
// (Lemire, Kaser & Kurz 2019): the routing divides every posting's stem id twice (its owner in the
// parse loop, its list's slot at the owner), and a 32-bit division takes tens of cycles.
class DivideBy {
 public:
  explicit DivideBy(uint32_t d) : d_(d), m_(~uint64_t{0} / d + 1) {}
  uint32_t quotient(uint32_t a) const { return static_cast<uint32_t>((static_cast<unsigned __int128>(m_) * a) >> 64); }
  uint32_t remainder(uint32_t a) const {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(m_ * a) * d_) >> 64);
  }

 private:
  uint64_t d_, m_;
};

class PostingRouter {
 public:
  // Postings handed over by parser `from`, in the order it read their documents.
  using Sink = std::function<void(size_t from, std::span<const RoutedPosting>)>;
  // `parsers` parsers (at least 2); while more than `max_queued` postings wait in the inboxes, a parser that
  // hands over more first empties its own inbox, then waits for the others to take theirs.
  PostingRouter(size_t parsers, size_t max_queued);
  PostingRouter(const PostingRouter&) = delete;
  PostingRouter& operator=(const PostingRouter&) = delete;

  size_t parsers() const { return parsers_; }
  size_t owner(uint32_t stem) const { return by_parsers_.remainder(stem); }
  // Parser `from`'s posting of a stem another parser owns, held until the next hand_over().
  void add(size_t from, uint32_t stem, DocId doc, TermFreq freq) {
    Outbox& out = outboxes_[from];
    out.buffers[owner(stem)].push_back({stem, doc, freq});
    ++out.held;
  }
  size_t held(size_t from) const { return outboxes_[from].held; }
  // Parser `from`'s held postings to their owners; then its own inbox to `sink`, on its thread.
  // `stop`: a failed build (no waiting for room then).
  void hand_over(size_t from, const Sink& sink, const std::atomic<bool>& stop);
  // Parser `to`'s inbox to `sink`: true if it held anything.
  bool take(size_t to, const Sink& sink);
  // Parser `from` hands over what it holds and then no more (call it once, after its last add());
  // then its inbox goes to `sink` until every parser has finished and it is empty.
  void finish(size_t from, const Sink& sink, const std::atomic<bool>& stop);
  // Postings handed over in all (a parser's own stems' are not counted).
  uint64_t routed() const { return routed_.load(std::memory_order_relaxed); }

 private:
  using Buffer = std::vector<RoutedPosting>;
  // A cache line each: add() writes `held` for every posting, and two parsers' outboxes in one
  // line had bounced it between their cores.
  struct alignas(64) Outbox {
    std::vector<Buffer> buffers;  // by owner
    size_t held = 0;
  };
  struct Handed {
    size_t from;
    Buffer buffer;
  };
  struct alignas(64) Inbox {
    std::mutex mutex;
    std::vector<Handed> handed;  // in the order they were handed over
  };
  Buffer spare();
  void push(size_t from);  // parser `from`'s held postings into their owners' inboxes

  const size_t parsers_;
  const DivideBy by_parsers_;
  const size_t max_queued_;
  std::vector<Outbox> outboxes_;
  std::unique_ptr<Inbox[]> inboxes_;
  std::mutex spares_mutex_;
  std::vector<Buffer> spares_;  // emptied buffers, their capacity kept
  std::atomic<uint64_t> queued_{0}, routed_{0};
  std::mutex wait_mutex_;
  std::condition_variable handed_;  // postings handed over or taken, or a parser finished
  size_t producing_;                // under wait_mutex_
};

}  // namespace warp::pipeline
