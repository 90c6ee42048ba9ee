// One stem cache for every parser of a build: folded token → stem id, stem id → stem text, read
// and filled by many threads at once without locks. Per-parser caches each held a share of the
// budget: at 16 parsers under 2 GiB, 2^18 tokens each, less than the vocabulary of a large
// collection, so each filled within a chunk, was emptied, and every word was stemmed and looked up
// in the parser's dictionary again (at 16 threads a third of the build's CPU; the same memory as
// one table holds sixteen times the words, each stemmed once).
// Insert-only, and ids never change, so a holder of stem ids never has to forget them.
// It grows as the vocabulary does, in segments: the first holds `tokens` tokens; when one is full
// (its tokens or its stems), the next, twice its size, takes the new words, until `max_tokens` in
// all would be passed (each segment's hash tables are read at random, so all their pages are soon
// resident: a corpus of a small vocabulary pays only for the first). Lookups probe the segments in
// turn, oldest (most frequent words) first. Stem entries and texts are one array each across the
// segments (filled in id order, so mapped as they fill). Once no segment can be added (tokens,
// stems or text), it is frozen: finds still work, inserts refuse, and each analyzer caches the
// words it misses from then on in its own StemCache under ids from stems() up
// (Analyzer::share_stem_cache). A word missed once frozen has its stem looked up here before the
// analyzer's own cache names it, so that one stem never has two ids (a document's terms are
// counted by id).
// One stem, one id across segments: a segment is closed to new ids, and every id it handed out is
// in its stem slots, before the next opens; a new stem is looked for in the closed segments (never
// written again) before the open one, where slots are claimed by compare-and-swap. A token may end
// in two segments (found missing in both by two threads about a segment's close): both name its
// stem's one id.
// Slots publish with release stores of their tag (tokens) or id (stems), read with acquire loads;
// a token slot being written is marked busy for the few stores that fill it.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
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
  static constexpr size_t kMaxSegments = 8;

  // Room for `tokens` tokens (rounded up to a power of two, at most 2^26) and as many stems; with
  // `max_tokens` above that, segments of twice the last's size (powers of two) are added while
  // all of them together stay within it.
  explicit SharedStemCache(size_t tokens, size_t max_tokens = 0);
  ~SharedStemCache();
  SharedStemCache(const SharedStemCache&) = delete;
  SharedStemCache& operator=(const SharedStemCache&) = delete;

  // The stem id of a token (its StemCache::hash given), or kMissing. Inline: the indexer's
  // hottest lookup; the first segment (the frequent words') probed before anything else is read.
  uint32_t find(std::string_view token, uint64_t h) const {
    const uint32_t id = find_in(segments_[0], token, h);
    return id != kMissing || open_segments() == 1 ? id : find_in_later(token, h);
  }
  // Always inlined: GCC 12 at -O3 drops calls to a function that only prefetches (a "const"
  // function whose result is unused) before it would inline them. The first segment's slot, and
  // the others' where there are others.
  [[gnu::always_inline]] void prefetch(uint64_t h) const {
    __builtin_prefetch(segments_[0].tokens.get() + (h & segments_[0].token_mask));
    if (open_segments() > 1) prefetch_later(h);
  }
  // Records token → stem and returns the stem id, or kMissing once frozen. Two threads inserting
  // one token get one id.
  uint32_t insert(std::string_view token, uint64_t h, std::string_view stem);
  // The id of a stem, or kMissing; once frozen and wait_until_settled(), a stem it misses is in
  // no slot.
  uint32_t find_stem(std::string_view stem) const;
  // Once frozen: waits until every stem id handed out is in its slot or unused for good (another
  // thread may have taken an id just before the table froze and not yet published it).
  void wait_until_settled() const { wait_until_settled(stems()); }
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
  uint32_t stems() const { return std::min(count_of(state_.load(std::memory_order_acquire)), stem_capacity_); }
  bool frozen() const { return (state_.load(std::memory_order_acquire) & kFinal) != 0; }
  // Every id it can ever hand out is below it: the tokens of every segment it may open.
  size_t capacity() const { return stem_capacity_; }
  // The segments open so far, and the first one alone (what the cache costs whatever the corpus).
  size_t segments() const { return open_segments(); }
  size_t memory_bytes() const;
  size_t first_segment_bytes() const { return segment_bytes(segments_[0].token_capacity); }

 private:
  static constexpr uint32_t kBusy = 2;  // a token slot being filled (real tags are odd, 0 is empty)
  // state_: ids handed out (low 32 bits), the open segment's index (bits 40-47), and two flags:
  // the open segment takes no more ids (it is being closed), and the cache is frozen for good.
  static constexpr uint64_t kClosing = uint64_t{1} << 32;
  static constexpr uint64_t kFinal = uint64_t{1} << 33;
  static constexpr int kSegmentShift = 40;
  static uint32_t count_of(uint64_t state) { return static_cast<uint32_t>(state); }
  static size_t segment_of(uint64_t state) { return static_cast<size_t>(state >> kSegmentShift) & 0xFF; }
  struct StemEntry {
    uint64_t hash;
    uint32_t offset, size;
  };
  // A segment's hash tables, at most half full: tokens and stems (0 = empty, else stem id + 1).
  // Set before the segment is published (open_ is raised), read-only afterwards; its counter of
  // tokens is on a line of its own (every insert into the open segment updates it).
  struct Segment {
    ZeroedTable<TokenSlot> tokens;
    ZeroedTable<uint32_t> stem_slots;
    size_t token_mask = 0, stem_mask = 0;
    uint32_t token_capacity = 0;
    uint32_t id_limit = 0;  // the ids it may hand out are below it
    alignas(64) std::atomic<uint32_t> token_count{0};
  };
  static constexpr uint64_t kNoRoom = ~uint64_t{0};
  static constexpr uint32_t kClosed = kMissing - 1;  // from the open segment's insert: it is closing, try the next
  static size_t segment_bytes(size_t tokens) { return tokens * kEntryBytes; }
  // The token's stem id in one segment's slots, or kMissing.
  uint32_t find_in(const Segment& segment, std::string_view token, uint64_t h) const {
    const uint32_t tag = TokenSlot::tag_of(h);
    for (size_t i = h & segment.token_mask;; i = (i + 1) & segment.token_mask) {
      const TokenSlot& slot = segment.tokens[i];
      uint32_t seen = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(slot.tag)).load(std::memory_order_acquire);
      if (seen == kBusy) seen = published_tag(slot);
      if (seen == 0) return kMissing;
      if (seen == tag && slot.holds(token, text_.get())) return slot.stem;
    }
  }
  uint32_t find_in_later(std::string_view token, uint64_t h) const;  // the segments after the first
  void prefetch_later(uint64_t h) const;
  size_t open_segments() const { return open_.load(std::memory_order_acquire); }
  // Maps segment s's tables; its ids from first_id up.
  void open_segment(size_t s, uint32_t first_id);
  // Copies `text` into the text area; its offset, or kNoRoom (and frozen) when full.
  uint64_t add_text(std::string_view text);
  // The slot's tag once it is not busy.
  static uint32_t published_tag(const TokenSlot& slot);
  // The stem's id in segment s's slots, or kMissing.
  uint32_t find_stem_in(const Segment& segment, std::string_view text, uint64_t h) const;
  // The stem's id: found in a closed segment, or found or added in the open one (`segment`),
  // kClosed where that one closed meanwhile, kMissing once frozen.
  uint32_t find_or_add_stem(size_t segment, std::string_view text);
  // The token into the open segment's token slots (or the next one's, where it is full).
  void add_token(std::string_view token, uint64_t h, uint32_t stem_id, uint64_t long_text);
  // Closes segment `full` (no more ids), waits until its ids are settled, and opens the next one,
  // or freezes the cache where none may be added. Nothing where another thread did it first.
  void close_segment(size_t full);
  void wait_until_settled(uint32_t ids) const;
  void freeze() { state_.fetch_or(kFinal, std::memory_order_acq_rel); }
  // Per thread, where the first segment holds kBlocksFrom tokens or more: room in the text area
  // and in the open segment's token count taken kTextBlock bytes and kTokenBlock tokens at a time,
  // and ids settled on a counter of its own. At 16 parsers the first chunks bring most of the
  // vocabulary at once, and each new stem's three read-modify-writes of one line shared by every
  // thread (the id, its text's room, its settling) and one of the token count had been 55% of the
  // build's CPU in its first tenth of a second (tests/bench/results/indexing.md). Smaller caches (tests of their
  // limits) keep the exact counts. The ids themselves still come one at a time (a segment's close waits for every id
  // handed out).
  static constexpr size_t kBlocksFrom = size_t{1} << 14;
  static constexpr uint64_t kTextBlock = 1024;
  static constexpr uint32_t kTokenBlock = 16;
  static constexpr uint32_t kSettledSlots = 64;  // threads past these settle on the shared count
  struct ThreadShare;                            // a thread's blocks of this cache
  ThreadShare& mine() const;
  bool take_token_room(Segment& segment, size_t s);
  void settle_one();
  uint64_t settled() const;

  std::array<Segment, kMaxSegments> segments_;
  std::array<uint32_t, kMaxSegments> planned_{};  // each segment's tokens (0: never opened)
  // Tables mapped zeroed: no page is touched before a slot on it is used.
  ZeroedTable<StemEntry> stems_;
  ZeroedTable<char> text_;
  uint32_t stem_capacity_ = 0;
  uint64_t text_capacity_ = 0;
  std::mutex closing_;  // one thread closes a segment
  // The counters every insert updates, on a cache line of their own: beside the masks and table
  // pointers that every find() reads, each insert from one thread took that line from all others.
  alignas(64) std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> settled_{0};  // ids handed out and then published or left unused
  std::atomic<uint64_t> text_used_{0};
  alignas(64) std::atomic<size_t> open_{1};  // segments published
  const uint64_t instance_;                  // tells a thread's blocks of this cache from those of an earlier one
  bool blocks_ = false;                      // kBlocksFrom
  struct alignas(64) SettledSlot {
    std::atomic<uint32_t> ids{0};
  };
  std::unique_ptr<SettledSlot[]> settled_by_thread_;  // the rest of settled_, a line a thread
  std::atomic<uint32_t> settled_slots_{0};            // claimed so far
};

}  // namespace warp
