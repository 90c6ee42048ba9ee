#include "common/analysis/shared_stem_cache.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

#include "common/analysis/stem_cache.hpp"

namespace warp {
namespace {

// Slots are plain words (zeroed huge pages) accessed through atomic_ref where threads meet.
uint32_t load_acquire(const uint32_t& word) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word)).load(std::memory_order_acquire);
}

}  // namespace

SharedStemCache::SharedStemCache(size_t tokens) {
  const size_t capacity = std::bit_ceil(std::clamp<size_t>(tokens, 64, size_t{1} << 26));
  token_capacity_ = stem_capacity_ = static_cast<uint32_t>(capacity);
  token_mask_ = stem_mask_ = 2 * capacity - 1;  // at most half full
  text_capacity_ = 16 * capacity;
  tokens_ = ZeroedTable<TokenSlot>(2 * capacity);
  stem_slots_ = ZeroedTable<uint32_t>(2 * capacity);
  stems_ = ZeroedTable<StemEntry>(capacity);
  text_ = ZeroedTable<char>(text_capacity_);
}

SharedStemCache::~SharedStemCache() = default;

size_t SharedStemCache::memory_bytes() const {
  return 2 * size_t{token_capacity_} * sizeof(TokenSlot) + 2 * size_t{stem_capacity_} * sizeof(uint32_t) +
         size_t{stem_capacity_} * sizeof(StemEntry) + text_capacity_;
}

uint32_t SharedStemCache::published_tag(const TokenSlot& slot) {
  uint32_t tag = load_acquire(slot.tag);
  for (int spins = 0; tag == kBusy; tag = load_acquire(slot.tag)) {  // filled by a few stores
    if (++spins > 64) std::this_thread::yield();
  }
  return tag;
}

uint64_t SharedStemCache::add_text(std::string_view text) {
  const uint64_t offset = text_used_.fetch_add(text.size(), std::memory_order_relaxed);
  if (offset + text.size() > text_capacity_) return freeze(), kNoRoom;
  std::memcpy(text_.get() + offset, text.data(), text.size());
  return offset;
}

uint32_t SharedStemCache::find_stem(std::string_view stem) const {
  const uint64_t h = StemCache::hash(stem);
  for (size_t i = h & stem_mask_;; i = (i + 1) & stem_mask_) {
    const uint32_t slot = load_acquire(stem_slots_[i]);
    if (slot == 0) return kMissing;
    const StemEntry& e = stems_[slot - 1];
    if (e.hash == h && e.size == stem.size() && std::memcmp(text_.get() + e.offset, stem.data(), stem.size()) == 0) return slot - 1;
  }
}

void SharedStemCache::wait_until_settled() const {
  for (int spins = 0; settled_.load(std::memory_order_acquire) < stems(); ++spins) {
    if (spins > 64) std::this_thread::yield();
  }
}

uint32_t SharedStemCache::find_or_add_stem(std::string_view text) {
  const uint64_t h = StemCache::hash(text);
  uint32_t id = kMissing;  // one allocated by this call and not yet published
  // Every id handed out ends settled: published, or left unused (lost race, no room for its text).
  const auto settle = [&](uint32_t result) {
    if (id != kMissing) settled_.fetch_add(1, std::memory_order_acq_rel);
    return result;
  };
  for (size_t i = h & stem_mask_;; i = (i + 1) & stem_mask_) {
    uint32_t slot = load_acquire(stem_slots_[i]);
    while (slot == 0) {
      if (id == kMissing) {  // an id and the text's room first, then the slot
        uint32_t next = next_stem_.load(std::memory_order_relaxed);
        do {
          if ((next & kFrozen) != 0) return kMissing;
          if (next >= stem_capacity_) return freeze(), kMissing;
        } while (!next_stem_.compare_exchange_weak(next, next + 1, std::memory_order_acq_rel));
        id = next;
        const uint64_t offset = add_text(text);
        if (offset == kNoRoom) return settle(kMissing);  // the id stays unused
        stems_[id] = {h, static_cast<uint32_t>(offset), static_cast<uint32_t>(text.size())};
      }
      if (std::atomic_ref<uint32_t>(stem_slots_[i]).compare_exchange_strong(slot, id + 1, std::memory_order_acq_rel)) return settle(id);
      // Another thread took the slot first (`slot` now holds its id): compare with that stem.
    }
    const StemEntry& e = stems_[slot - 1];
    if (e.hash == h && e.size == text.size() && std::memcmp(text_.get() + e.offset, text.data(), text.size()) == 0) {
      return settle(slot - 1);  // an id this call allocated, if any, stays unused
    }
  }
}

uint32_t SharedStemCache::insert(std::string_view token, uint64_t h, std::string_view stem) {
  if (frozen()) return kMissing;
  const uint32_t stem_id = find_or_add_stem(stem);
  if (stem_id == kMissing) return kMissing;
  uint64_t long_text = 0;  // a token too long for its slot: its text's offset
  if (token.size() > TokenSlot::kInlineBytes && (long_text = add_text(token)) == kNoRoom) return kMissing;
  if (token_count_.fetch_add(1, std::memory_order_relaxed) >= token_capacity_) return freeze(), kMissing;
  const uint32_t tag = TokenSlot::tag_of(h);
  for (size_t i = h & token_mask_;; i = (i + 1) & token_mask_) {
    TokenSlot& slot = tokens_[i];
    uint32_t seen = published_tag(slot);
    if (seen == 0) {
      if (!std::atomic_ref<uint32_t>(slot.tag).compare_exchange_strong(seen, kBusy, std::memory_order_acquire)) {
        seen = published_tag(slot);  // filled meanwhile: compare with what it holds
      } else {
        slot.stem = stem_id;
        slot.set_token(token, static_cast<uint32_t>(long_text));
        std::atomic_ref<uint32_t>(slot.tag).store(tag, std::memory_order_release);
        return stem_id;
      }
    }
    if (seen == tag && slot.holds(token, text_.get())) return slot.stem;
  }
}

}  // namespace warp
