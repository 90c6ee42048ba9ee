// One stem cache for every parser of a build: folded token → stem id, stem id → stem text, read
// and filled by many threads at once without locks. Per-parser caches each held a share of the
// budget: at 16 parsers under 2 GiB, 2^18 tokens each, less than the vocabulary of a large
// collection, so each filled within a chunk, was emptied, and every word was stemmed and looked up
// in the parser's dictionary again (at 16 threads a third of the build's CPU; the same memory as
// one table holds sixteen times the words, each stemmed once).
// Insert-only and of a fixed capacity, sized up front: ids never change, so a holder of stem ids
// never has to forget them. Once full (tokens, stems or text), it is frozen: finds still work,
// inserts refuse, and each analyzer caches the words it misses from then on in its own
// StemCache under ids from stems() up (Analyzer::share_stem_cache).
// A word missed once frozen has its stem looked up here before the analyzer's own cache names it,
// so that one stem never has two ids (a document's terms are counted by id).
// Slots publish with release stores of their tag (tokens) or id (stems), read with acquire loads;
// a token slot being written is marked busy for the few stores that fill it.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/analysis/stem_cache.hpp"
#include "common/analysis/token_slot.hpp"
#include "common/util/huge_pages.hpp"

namespace warp {

class SharedStemCache {
 public:
  static constexpr uint32_t kMissing = StemCache::kMissing;  // one "missing" for both (the analyzer mixes them)
  // Bytes per token of capacity: two token slots (64), a stem entry (16), two stem slots (8), 16
  // of stem text.
  static constexpr size_t kEntryBytes = 104;

  // Room for `tokens` tokens (rounded up to a power of two, at most 2^26) and as many stems.
  explicit SharedStemCache(size_t tokens);
  ~SharedStemCache();
  SharedStemCache(const SharedStemCache&) = delete;
  SharedStemCache& operator=(const SharedStemCache&) = delete;

  // The stem id of a token (its StemCache::hash given), or kMissing. Inline: the indexer's
  // hottest lookup.
  uint32_t find(std::string_view token, uint64_t h) const {
    const uint32_t tag = TokenSlot::tag_of(h);
    for (size_t i = h & token_mask_;; i = (i + 1) & token_mask_) {
      const TokenSlot& slot = tokens_[i];
      uint32_t seen = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(slot.tag)).load(std::memory_order_acquire);
      if (seen == kBusy) seen = published_tag(slot);
      if (seen == 0) return kMissing;
      if (seen == tag && slot.holds(token, text_.get())) return slot.stem;
    }
  }
  // Always inlined: GCC 12 at -O3 drops calls to a function that only prefetches (a "const"
  // function whose result is unused) before it would inline them.
  [[gnu::always_inline]] void prefetch(uint64_t h) const { __builtin_prefetch(tokens_.get() + (h & token_mask_)); }
  // Records token → stem and returns the stem id, or kMissing once frozen. Two threads inserting
  // one token get one id.
  uint32_t insert(std::string_view token, uint64_t h, std::string_view stem);
  // The id of a stem, or kMissing; once frozen and wait_until_settled(), a stem it misses is in
  // no slot.
  uint32_t find_stem(std::string_view stem) const;
  // Once frozen: waits until every stem id handed out is in its slot or unused for good (another
  // thread may have taken an id just before the table froze and not yet published it).
  void wait_until_settled() const;
  // Brings a stem's entry into cache, then (once the entry is there) its text: a walk over stems
  // in text order reads both at random (ids follow first sight), two cache misses a stem.
  [[gnu::always_inline]] void prefetch_entry(uint32_t id) const { __builtin_prefetch(&stems_[id]); }
  [[gnu::always_inline]] void prefetch_text(uint32_t id) const { __builtin_prefetch(text_.get() + stems_[id].offset); }
  // Valid for every id that find() or insert() returned.
  std::string_view stem(uint32_t id) const {
    const StemEntry& e = stems_[id];
    return {text_.get() + e.offset, e.size};
  }
  // Ids handed out so far: every id returned is below it (final once frozen()).
  uint32_t stems() const { return std::min(next_stem_.load(std::memory_order_acquire) & ~kFrozen, stem_capacity_); }
  bool frozen() const { return (next_stem_.load(std::memory_order_acquire) & kFrozen) != 0; }
  size_t capacity() const { return stem_capacity_; }
  size_t memory_bytes() const;

 private:
  static constexpr uint32_t kBusy = 2;  // a token slot being filled (real tags are odd, 0 is empty)
  static constexpr uint32_t kFrozen = 0x80000000u;  // in next_stem_
  struct StemEntry {
    uint64_t hash;
    uint32_t offset, size;
  };
  static constexpr uint64_t kNoRoom = ~uint64_t{0};
  // Copies `text` into the text area; its offset, or kNoRoom (and frozen) when full.
  uint64_t add_text(std::string_view text);
  // The slot's tag once it is not busy.
  static uint32_t published_tag(const TokenSlot& slot);
  uint32_t find_or_add_stem(std::string_view text);
  void freeze() { next_stem_.fetch_or(kFrozen, std::memory_order_acq_rel); }

  // Tables mapped zeroed: no page is touched before a slot on it is used.
  ZeroedTable<TokenSlot> tokens_;
  ZeroedTable<uint32_t> stem_slots_;  // 0 = empty, else stem id + 1
  ZeroedTable<StemEntry> stems_;
  ZeroedTable<char> text_;
  size_t token_mask_ = 0, stem_mask_ = 0;
  uint32_t token_capacity_ = 0, stem_capacity_ = 0;
  uint64_t text_capacity_ = 0;
  // The counters every insert updates, on a cache line of their own: beside the masks and table
  // pointers that every find() reads, each insert from one thread took that line from all others.
  // (Last: the class's alignment pads its end to the line.)
  alignas(64) std::atomic<uint32_t> next_stem_{0};  // ids handed out, kFrozen once full
  std::atomic<uint32_t> settled_{0};  // ids handed out and then published or left unused
  std::atomic<uint32_t> token_count_{0};
  std::atomic<uint64_t> text_used_{0};
};

}  // namespace warp
