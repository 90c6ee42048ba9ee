// The analyzer's memory of recent words: folded token → stem id, and stem id → stem text. Word
// frequencies are Zipfian, so most tokens of a text are found here and skip the stemmer; ids
// name distinct stems (two tokens with one stem share it), so an indexer counts a document's terms
// in a dense array instead of hashing strings a second time.
// Tokens: open addressing over 32-byte slots that hold a hash tag, the stem id and the token
// itself when it fits (23 bytes: nearly every word), so a lookup reads one cache line, usually
// one slot. The slot array was first an index into entries whose texts lay in an arena: three
// dependent cache misses per lookup, 15% of a one-thread build with a large vocabulary.
// Stems (id → text, and text → id when a new token is inserted) keep entries and an arena.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/analysis/token_slot.hpp"
#include "common/util/huge_pages.hpp"

namespace warp {

class StemCache {
 public:
  static constexpr uint32_t kMissing = 0xFFFFFFFFu;
  // Bytes per cached token in a cache reserve()d for a power-of-two number of them: two token
  // slots (64), a stem entry (16), two stem slots (8), its text with the arena's slack (16).
  static constexpr size_t kEntryBytes = 104;
  // Sizes the tables for `tokens` tokens (and as many stems) up front, so that a cache filled to
  // that many never grows (and never holds two tables at once while it does). Past it, it grows.
  void reserve(size_t tokens);

  // The stem id of a token, or kMissing.
  uint32_t find(std::string_view token) const { return find(token, hash(token)); }
  // The same with the token's hash() given: a caller looking up many tokens hashes them ahead and
  // prefetches their slots, so the cache misses of a text overlap instead of following each other.
  uint32_t find(std::string_view token, uint64_t h) const;
  void prefetch(uint64_t h) const {
    if (!token_slots_.empty()) __builtin_prefetch(&token_slots_[h & (token_slots_.size() - 1)]);
  }
  // 64-bit multiply-xorshift over 8-byte words; tokens are short, so the tail dominates.
  static uint64_t hash(std::string_view text) {
    uint64_t tail = 0;
    const size_t whole = text.size() & ~size_t{7};
    std::memcpy(&tail, text.data() + whole, text.size() - whole);
    return hash_words(text, tail);
  }
  // hash(text) where 8 bytes past the text's end may be read (the analyzer's token buffer has that
  // slack): the last word is one load, masked, instead of a copy of a variable size.
  static uint64_t hash_padded(std::string_view text) {
    const size_t whole = text.size() & ~size_t{7};
    uint64_t tail;
    std::memcpy(&tail, text.data() + whole, 8);
    tail &= (uint64_t{1} << (8 * (text.size() - whole))) - 1;  // the text's bytes, little-endian first
    return hash_words(text, tail);
  }
  // Records token → stem (stem text added once); returns the stem id.
  uint32_t insert(std::string_view token, std::string_view stem);
  std::string_view stem(uint32_t id) const {
    const Entry& e = stems_[id];
    return std::string_view(arena_).substr(e.offset, e.size);
  }
  size_t stems() const { return stems_.size(); }
  size_t tokens() const { return token_count_; }
  // Empties the cache (stem ids are reused from 0 afterwards) and moves to the next epoch.
  void clear();
  // How many times clear() has run: a holder of stem ids keyed by this knows when they go stale.
  uint64_t epoch() const { return epoch_; }

 private:
  // The hash of `text` whose last, partial word (its bytes past the whole words, zero above them)
  // is `tail`.
  static uint64_t hash_words(std::string_view text, uint64_t tail) {
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
    uint64_t h = text.size() * kMul;
    for (size_t i = 0; i + 8 <= text.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      h = (h ^ word) * kMul;
      h ^= h >> 29;
    }
    h = (h ^ tail) * kMul;
    return h ^ (h >> 32);
  }
  struct Entry {  // a stem
    uint64_t hash;
    uint32_t offset, size;  // of the text in the arena
  };
  // Whether the slot holds `token` under `tag`.
  bool holds(const TokenSlot& slot, uint32_t tag, std::string_view token) const {
    return slot.tag == tag && slot.holds(token, arena_.data());
  }
  void rehash_tokens(size_t slot_count);
  // The index in stem_slots_ of the slot holding the stem `text` (its id + 1), or of the empty slot
  // where it would go.
  size_t probe_stem(std::string_view text, uint64_t h) const;
  uint32_t add_stem(std::string_view text, uint64_t h);  // a stem not cached yet; returns its id
  void rehash_stems(size_t slot_count);

  std::string arena_;  // stem texts, and tokens too long to sit in their slot
  std::vector<Entry> stems_;
  HugeVector<uint32_t> stem_slots_;    // power-of-two sized; 0 = empty, else entry index + 1
  HugeVector<TokenSlot> token_slots_;  // power-of-two sized, at most 3/4 full
  size_t token_count_ = 0;
  uint64_t epoch_ = 0;
};

}  // namespace warp
