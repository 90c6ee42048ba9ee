#include "common/analysis/stem_cache.hpp"

#include <cstring>

namespace warp {

// 64-bit multiply-xorshift over 8-byte words; tokens are short, so the tail dominates.
uint64_t StemCache::hash(std::string_view text) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = text.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    h = (h ^ word) * kMul;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, text.data() + i, text.size() - i);
  h = (h ^ tail) * kMul;
  return h ^ (h >> 32);
}

size_t StemCache::probe(const std::vector<uint32_t>& slots, const std::vector<Entry>& entries, std::string_view text,
                        uint64_t h) const {
  const size_t mask = slots.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint32_t slot = slots[i];
    if (slot == 0) return i;
    const Entry& e = entries[slot - 1];
    if (e.hash == h && e.size == text.size() && std::memcmp(arena_.data() + e.offset, text.data(), text.size()) == 0) return i;
  }
}

uint32_t StemCache::find(std::string_view token) const {
  if (token_slots_.empty()) return kMissing;
  const size_t i = probe(token_slots_, tokens_, token, hash(token));
  return token_slots_[i] == 0 ? kMissing : tokens_[token_slots_[i] - 1].stem;
}

uint32_t StemCache::add(std::vector<uint32_t>& slots, std::vector<Entry>& entries, std::string_view text, uint64_t h,
                        uint32_t stem) {
  if (2 * (entries.size() + 1) > slots.size()) {  // at most half full
    slots.assign(std::max<size_t>(64, 2 * slots.size()), 0);
    for (uint32_t e = 0; e < entries.size(); ++e) {
      size_t i = entries[e].hash & (slots.size() - 1);
      while (slots[i] != 0) i = (i + 1) & (slots.size() - 1);
      slots[i] = e + 1;
    }
  }
  entries.push_back({h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size()), stem});
  arena_.append(text);
  slots[probe(slots, entries, text, h)] = static_cast<uint32_t>(entries.size());
  return static_cast<uint32_t>(entries.size() - 1);
}

uint32_t StemCache::insert(std::string_view token, std::string_view stem) {
  const uint64_t stem_hash = hash(stem);
  uint32_t stem_id;
  const size_t at = stem_slots_.empty() ? 0 : probe(stem_slots_, stems_, stem, stem_hash);
  if (!stem_slots_.empty() && stem_slots_[at] != 0) {
    stem_id = stem_slots_[at] - 1;
  } else {
    stem_id = add(stem_slots_, stems_, stem, stem_hash, 0);
  }
  const uint64_t token_hash = hash(token);
  if (token_slots_.empty() || token_slots_[probe(token_slots_, tokens_, token, token_hash)] == 0) {
    add(token_slots_, tokens_, token, token_hash, stem_id);
  }
  return stem_id;
}

void StemCache::clear() {
  arena_.clear();
  tokens_.clear();
  stems_.clear();
  token_slots_.assign(token_slots_.size(), 0);
  stem_slots_.assign(stem_slots_.size(), 0);
}

}  // namespace warp
