#include "common/analysis/stem_cache.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace warp {

uint32_t StemCache::find(std::string_view token, uint64_t h) const {
  if (token_slots_.empty()) return kMissing;
  const uint32_t tag = TokenSlot::tag_of(h);
  const size_t mask = token_slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const TokenSlot& slot = token_slots_[i];
    if (slot.tag == 0) return kMissing;
    if (holds(slot, tag, token)) return slot.stem;
  }
}

size_t StemCache::probe_stem(std::string_view text, uint64_t h) const {
  const size_t mask = stem_slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint32_t slot = stem_slots_[i];
    if (slot == 0) return i;
    const Entry& e = stems_[slot - 1];
    if (e.hash == h && e.size == text.size() && std::memcmp(arena_.data() + e.offset, text.data(), text.size()) == 0)
      return i;
  }
}

void StemCache::rehash_stems(size_t slot_count) {
  stem_slots_.assign(slot_count, 0);
  for (uint32_t e = 0; e < stems_.size(); ++e) {
    size_t i = stems_[e].hash & (slot_count - 1);
    while (stem_slots_[i] != 0) i = (i + 1) & (slot_count - 1);
    stem_slots_[i] = e + 1;
  }
}

uint32_t StemCache::add_stem(std::string_view text, uint64_t h) {
  if (4 * (stems_.size() + 1) > 3 * stem_slots_.size())
    rehash_stems(std::max<size_t>(64, 2 * stem_slots_.size()));  // at most 3/4 full
  stems_.push_back({h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size())});
  arena_.append(text);
  stem_slots_[probe_stem(text, h)] = static_cast<uint32_t>(stems_.size());
  return static_cast<uint32_t>(stems_.size() - 1);
}

// A slot's hash is not kept: rehashing reads each token again (inline or from the arena), which
// costs once per doubling.
void StemCache::rehash_tokens(size_t slot_count) {
  HugeVector<TokenSlot> old(slot_count);
  old.swap(token_slots_);
  const size_t mask = slot_count - 1;
  for (const TokenSlot& slot : old) {
    if (slot.tag == 0) continue;
    size_t i = hash(slot.token(arena_.data())) & mask;
    while (token_slots_[i].tag != 0) i = (i + 1) & mask;
    token_slots_[i] = slot;
  }
}

void StemCache::reserve(size_t tokens) {
  const size_t slots = std::bit_ceil(std::max<size_t>(64, 2 * tokens));
  if (slots > token_slots_.size()) rehash_tokens(slots);
  if (slots > stem_slots_.size()) rehash_stems(slots);
  stems_.reserve(tokens);
  arena_.reserve(tokens * 8);
}

uint32_t StemCache::insert(std::string_view token, std::string_view stem) {
  const uint64_t stem_hash = hash(stem);
  uint32_t stem_id;
  const size_t at = stem_slots_.empty() ? 0 : probe_stem(stem, stem_hash);
  if (!stem_slots_.empty() && stem_slots_[at] != 0) {
    stem_id = stem_slots_[at] - 1;
  } else {
    stem_id = add_stem(stem, stem_hash);
  }
  // At most 3/4 full: a cache reserve()d for its limit (half full there) never grows before the
  // trim that follows the document which crossed the limit.
  if (4 * (token_count_ + 1) > 3 * token_slots_.size()) rehash_tokens(std::max<size_t>(64, 2 * token_slots_.size()));
  const uint64_t h = hash(token);
  const uint32_t tag = TokenSlot::tag_of(h);
  const size_t mask = token_slots_.size() - 1;
  size_t i = h & mask;
  for (; token_slots_[i].tag != 0; i = (i + 1) & mask) {
    if (holds(token_slots_[i], tag, token)) return stem_id;  // known already
  }
  TokenSlot& slot = token_slots_[i];
  slot.tag = tag;
  slot.stem = stem_id;
  slot.set_token(token, static_cast<uint32_t>(arena_.size()));
  if (token.size() > TokenSlot::kInlineBytes) arena_.append(token);
  ++token_count_;
  return stem_id;
}

void StemCache::clear() {
  arena_.clear();
  stems_.clear();
  std::fill(stem_slots_.begin(), stem_slots_.end(), 0u);
  std::fill(token_slots_.begin(), token_slots_.end(), TokenSlot{});
  token_count_ = 0;
  ++epoch_;
}

}  // namespace warp
