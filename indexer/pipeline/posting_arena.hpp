#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "common/util/status.hpp"
#include "indexer/pipeline/indexers.hpp"

namespace warp::pipeline {

// The postings an indexer holds between spills, in slices of one arena: a term's list is a chain
// of slices of 2, 4, …, 512 postings (each followed by a link slot), cut from blocks of about an
// eighth of the indexer's share (8 KiB to 2 MiB, a huge page). A list of one posting keeps it in
// its entry instead (head: the docID, tail: the frequency): on a long-tailed vocabulary most of a
// parser's lists hold one or two postings, and a first slice of three slots for one posting had
// made the arena 1.5-1.9 times its postings' bytes at 16 threads, so parsers spilled sooner than
// one thread does. A spill empties the arena but keeps the blocks its share still allows (none
// where a device holds the parser's postings), so the next run reuses the same memory: no heap
// fragmentation from millions of small vectors, and the memory held (whole blocks) is counted
// exactly.
class PostingArena {
 public:
  explicit PostingArena(uint64_t share_bytes)
      : block_bits_(
            static_cast<uint32_t>(std::clamp<int>(std::bit_width(share_bytes / sizeof(Posting) / 8) - 1, 10, 18))) {}

  // All zero bytes: an empty list (tables of lists by stem id are mapped zeroed). 12 bytes: the
  // parsers keep one per stem of the shared cache each (a count of postings, which nothing read but
  // its state, had made it 16).
  struct List {
    enum : uint8_t { kEmpty = 0, kInline = 1, kSliced = 2 };
    uint32_t head = 0, tail = 0;  // kInline: the posting's docID and frequency
    uint16_t used = 0;            // postings in the tail slice
    uint8_t level = 0;            // of the tail slice
    uint8_t state = kEmpty;
    bool empty() const { return state == kEmpty; }
  };

  // Inlined where it is called: out of line (once add_routed() called it too), a one-thread build
  // spent a third more in its appends.
  [[gnu::always_inline]] void append(List& list, const Posting& posting) {
    if (list.state == List::kEmpty) {
      list.head = posting.doc, list.tail = posting.freq, list.state = List::kInline;
      ++postings_;
      return;
    }
    if (list.state == List::kInline) {  // out of the entry, into a first slice
      const Posting first{list.head, list.tail};
      list.head = list.tail = allocate(capacity(0) + 1);
      at(list.head) = first;
      list.used = 1, list.state = List::kSliced;
    } else if (list.used == capacity(list.level)) {
      const uint8_t level = static_cast<uint8_t>(std::min<int>(list.level + 1, kTopLevel));
      const uint32_t slice = allocate(capacity(level) + 1);
      at(list.tail + capacity(list.level)).doc = slice;  // the link slot
      list.tail = slice, list.level = level, list.used = 0;
    }
    at(list.tail + list.used++) = posting;
    ++postings_;
  }

  // Brings the slot the next append() to `list` writes into cache.
  void prefetch_tail(const List& list) const {
    if (list.state == List::kSliced) __builtin_prefetch(&at(list.tail + list.used), 1);
  }

  // Brings a list's first slice into cache (a spill reads the lists in term order, not the order
  // they were filled in: each list's first slice was a cache miss).
  void prefetch_head(const List& list) const {
    if (list.state == List::kSliced) __builtin_prefetch(&at(list.head));
  }

  // Appends the list's postings to `out`, a slice at a time.
  void gather(const List& list, std::vector<Posting>& out) const {
    if (list.state == List::kInline) {
      out.push_back({list.head, list.tail});
      return;
    }
    uint8_t level = 0;
    for (uint32_t slice = list.head;; level = next_level(level)) {
      append_slice(slice, slice == list.tail ? list.used : capacity(level), out);
      if (slice == list.tail) break;
      slice = at(slice + capacity(level)).doc;
    }
  }

  // Appends the postings of `n` lists to `out`, list after list (a routed stem's lists, one per
  // parser that read its documents). Their chains of slices are walked side by side first: each
  // round reads the link of every list not yet at its tail and prefetches the slice it names, so
  // the lists' cache misses overlap. One after another, each walk waited for its slices in turn,
  // and at 16 parsers a stem's postings lie in 16 times as many, shorter chains as at one: the
  // routed spill's gathers took 3.5 times the one-thread spill's samples for the same postings.
  void gather_lists(const List* lists, uint32_t n, std::vector<Posting>& out) {
    walks_.clear();
    for (uint32_t i = 0; i < n; ++i) {
      if (lists[i].state == List::kSliced) walks_.push_back({lists[i].head, i, 0});
    }
    if (walks_.size() <= 1) {
      for (uint32_t i = 0; i < n; ++i) {
        if (!lists[i].empty()) gather(lists[i], out);
      }
      return;
    }
    slices_.clear();
    for (size_t live = walks_.size(); live > 0;) {
      size_t kept = 0;
      for (size_t w = 0; w < live; ++w) {
        const Walk walk = walks_[w];
        const List& list = lists[walk.list];
        if (walk.slice == list.tail) {
          slices_.push_back({walk.slice, list.used, walk.list});
          continue;
        }
        const uint32_t size = capacity(walk.level);
        slices_.push_back({walk.slice, size, walk.list});
        const uint32_t next = at(walk.slice + size).doc;
        const uint8_t level = next_level(walk.level);
        __builtin_prefetch(&at(next));
        if (next != list.tail) __builtin_prefetch(&at(next + capacity(level)));  // its link, read next round
        walks_[kept++] = {next, walk.list, level};
      }
      live = kept;
    }
    // Each list's slices are in chain order among the rounds' records: grouped by list, in order.
    firsts_.assign(n + 1, 0);
    for (const Slice& slice : slices_) ++firsts_[slice.list + 1];
    for (uint32_t i = 0; i < n; ++i) firsts_[i + 1] += firsts_[i];
    by_list_.resize(slices_.size());
    for (const Slice& slice : slices_) by_list_[firsts_[slice.list]++] = slice;
    size_t next_slice = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (lists[i].state == List::kInline) {
        out.push_back({lists[i].head, lists[i].tail});
      } else if (lists[i].state == List::kSliced) {
        for (; next_slice < by_list_.size() && by_list_[next_slice].list == i; ++next_slice) {
          append_slice(by_list_[next_slice].slice, by_list_[next_slice].size, out);
        }
      }
    }
  }

  // Empties the arena, keeping at most `keep_bytes` of its blocks.
  void clear(uint64_t keep_bytes) {
    next_ = 0;
    postings_ = 0;
    blocks_.resize(std::min<size_t>(blocks_.size(), keep_bytes / block_bytes()));
  }
  uint64_t postings() const { return postings_; }
  uint64_t reserved_bytes() const { return blocks_.size() * block_bytes(); }

 private:
  uint64_t block_bytes() const { return sizeof(Posting) << block_bits_; }
  static constexpr int kTopLevel = 8;
  static uint32_t capacity(int level) { return 2u << level; }
  static uint8_t next_level(uint8_t level) { return static_cast<uint8_t>(std::min<int>(level + 1, kTopLevel)); }
  // A slice's first `n` postings onto `out`, copied whole (a slice never crosses a block).
  void append_slice(uint32_t slice, uint32_t n, std::vector<Posting>& out) const {
    const Posting* postings = &at(slice);
    out.insert(out.end(), postings, postings + n);
  }
  Posting& at(uint32_t index) { return blocks_[index >> block_bits_].get()[index & ((1u << block_bits_) - 1)]; }
  const Posting& at(uint32_t index) const {
    return blocks_[index >> block_bits_].get()[index & ((1u << block_bits_) - 1)];
  }
  // `size` consecutive slots; a slice never crosses a block.
  uint32_t allocate(uint32_t size) {
    if ((next_ & ((1u << block_bits_) - 1)) + size > (1u << block_bits_))
      next_ = ((next_ >> block_bits_) + 1) << block_bits_;
    if ((next_ >> block_bits_) >= blocks_.size()) {
      blocks_.emplace_back(static_cast<Posting*>(allocate_huge(block_bytes())));
    }
    const uint32_t slice = next_;
    next_ += size;
    return slice;
  }
  struct FreeHuge {
    void operator()(Posting* p) const noexcept { free_huge(p); }
  };
  uint32_t block_bits_;  // postings per block: 2^10 (a slice of 513 fits) to 2^18 (2 MiB)
  std::vector<std::unique_ptr<Posting, FreeHuge>> blocks_;  // of huge pages where 2 MiB
  uint32_t next_ = 0;
  uint64_t postings_ = 0;  // appended since the last clear, inline ones included
  // gather_lists()'s scratch: the walks under way, the slices found, the slices by list.
  struct Walk {
    uint32_t slice, list;
    uint8_t level;
  };
  struct Slice {
    uint32_t slice, size, list;
  };
  std::vector<Walk> walks_;
  std::vector<Slice> slices_, by_list_;
  std::vector<uint32_t> firsts_;
};

static_assert(sizeof(PostingArena::List) == ParserIndexer::kBytesPerSharedStem);

}  // namespace warp::pipeline
