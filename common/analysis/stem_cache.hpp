// The analyzer's memory of recent words: folded token → stem id, and stem id → stem text. Word
// frequencies are Zipfian, so most tokens of a text are found here and skip the stemmer; ids
// name distinct stems (two tokens with one stem share it), so an indexer counts a document's terms
// in a dense array instead of hashing strings a second time.
// Open addressing over flat arrays with the keys in one arena: a lookup touches one slot and one
// entry, where std::unordered_map chased a node and two heap strings (27% of a build's profile).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace warp {

class StemCache {
 public:
  static constexpr uint32_t kMissing = 0xFFFFFFFFu;
  // Bytes per cached token, counted generously (two entries, texts, slots, vectors grown by doubling).
  static constexpr size_t kEntryBytes = 128;

  // The stem id of a token, or kMissing.
  uint32_t find(std::string_view token) const;
  // Records token → stem (stem text added once); returns the stem id.
  uint32_t insert(std::string_view token, std::string_view stem);
  std::string_view stem(uint32_t id) const {
    const Entry& e = stems_[id];
    return std::string_view(arena_).substr(e.offset, e.size);
  }
  size_t stems() const { return stems_.size(); }
  size_t tokens() const { return tokens_.size(); }
  void clear();

 private:
  struct Entry {
    uint64_t hash;
    uint32_t offset, size;  // of the text in the arena
    uint32_t stem;          // tokens: their stem's id
  };
  static uint64_t hash(std::string_view text);
  // The index in `slots` of the slot holding `text` (entry index + 1), or of the empty slot where
  // it would go.
  size_t probe(const std::vector<uint32_t>& slots, const std::vector<Entry>& entries, std::string_view text, uint64_t h) const;
  uint32_t add(std::vector<uint32_t>& slots, std::vector<Entry>& entries, std::string_view text, uint64_t h, uint32_t stem);

  std::string arena_;
  std::vector<Entry> tokens_, stems_;
  std::vector<uint32_t> token_slots_, stem_slots_;  // power-of-two sized; 0 = empty
};

}  // namespace warp
