#include "common/analysis/shared_stem_cache.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <thread>

#include "common/analysis/stem_cache.hpp"

namespace warp {
namespace {

// Slots are plain words (zeroed huge pages) accessed through atomic_ref where threads meet.
uint32_t load_acquire(const uint32_t& word) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word)).load(std::memory_order_acquire);
}

constexpr size_t kMostTokens = size_t{1} << 26;

std::atomic<uint64_t> next_instance{1};

}  // namespace

struct SharedStemCache::ThreadShare {
  uint64_t instance = 0;
  uint64_t text_next = 0, text_end = 0;  // its room in the text area
  size_t token_segment = SIZE_MAX;       // the segment of its token room
  uint32_t tokens_left = 0;
  uint32_t settled_slot = UINT32_MAX;  // not claimed yet
};

SharedStemCache::ThreadShare& SharedStemCache::mine() const {
  // One cache at a time per thread: another cache's (or an earlier one's at the same address)
  // blocks are dropped, their rest unused.
  thread_local ThreadShare share;
  if (share.instance != instance_) share = ThreadShare{instance_};
  return share;
}

SharedStemCache::SharedStemCache(size_t tokens, size_t max_tokens)
    : instance_(next_instance.fetch_add(1, std::memory_order_relaxed)),
      settled_by_thread_(std::make_unique<SettledSlot[]>(kSettledSlots)) {
  planned_[0] = static_cast<uint32_t>(std::bit_ceil(std::clamp<size_t>(tokens, 64, kMostTokens)));
  size_t total = planned_[0];
  const size_t limit = std::min(std::max(max_tokens, total), 2 * kMostTokens);
  // Each next segment twice the last; the last one may be what is left of the limit, where that is
  // at least half of the one before (a smaller one would cost every missed lookup a probe for few
  // words).
  for (size_t s = 1; s < kMaxSegments && limit - total >= planned_[s - 1] / 2; ++s) {
    planned_[s] = static_cast<uint32_t>(std::min<size_t>(2 * size_t{planned_[s - 1]}, std::bit_floor(limit - total)));
    total += planned_[s];
    if (planned_[s] < 2 * planned_[s - 1]) break;
  }
  blocks_ = planned_[0] >= kBlocksFrom;
  stem_capacity_ = static_cast<uint32_t>(total);
  text_capacity_ = 16 * total;
  stems_ = ZeroedTable<StemEntry>(total);
  text_ = ZeroedTable<char>(text_capacity_);
  open_segment(0, 0);
}

SharedStemCache::~SharedStemCache() = default;

void SharedStemCache::open_segment(size_t s, uint32_t first_id) {
  Segment& segment = segments_[s];
  const size_t tokens = planned_[s];
  segment.tokens = ZeroedTable<TokenSlot>(2 * tokens);
  segment.stem_slots = ZeroedTable<uint32_t>(2 * tokens);
  segment.token_mask = segment.stem_mask = 2 * tokens - 1;  // at most half full
  segment.token_capacity = static_cast<uint32_t>(tokens);
  segment.id_limit = first_id + static_cast<uint32_t>(tokens);
}

size_t SharedStemCache::memory_bytes() const {
  size_t bytes = 0;
  const size_t open = open_segments();
  for (size_t s = 0; s < open; ++s) bytes += segment_bytes(planned_[s]);
  return bytes;
}

uint32_t SharedStemCache::published_tag(const TokenSlot& slot) {
  uint32_t tag = load_acquire(slot.tag);
  for (int spins = 0; tag == kBusy; tag = load_acquire(slot.tag)) {  // filled by a few stores
    if (++spins > 64) std::this_thread::yield();
  }
  return tag;
}

uint64_t SharedStemCache::add_text(std::string_view text) {
  if (blocks_ && text.size() <= kTextBlock / 4) {
    ThreadShare& me = mine();
    if (me.text_end - me.text_next < text.size()) {
      const uint64_t block = text_used_.fetch_add(kTextBlock, std::memory_order_relaxed);
      if (block + kTextBlock > text_capacity_) return freeze(), kNoRoom;
      me.text_next = block, me.text_end = block + kTextBlock;
    }
    const uint64_t offset = me.text_next;
    me.text_next += text.size();
    std::memcpy(text_.get() + offset, text.data(), text.size());
    return offset;
  }
  const uint64_t offset = text_used_.fetch_add(text.size(), std::memory_order_relaxed);
  if (offset + text.size() > text_capacity_) return freeze(), kNoRoom;
  std::memcpy(text_.get() + offset, text.data(), text.size());
  return offset;
}

uint32_t SharedStemCache::find_in_later(std::string_view token, uint64_t h) const {
  const size_t open = open_segments();
  for (size_t s = 1; s < open; ++s) {
    const uint32_t id = find_in(segments_[s], token, h);
    if (id != kMissing) return id;
  }
  return kMissing;
}

void SharedStemCache::prefetch_later(uint64_t h) const {
  const size_t open = open_segments();
  for (size_t s = 1; s < open; ++s) __builtin_prefetch(segments_[s].tokens.get() + (h & segments_[s].token_mask));
}

uint32_t SharedStemCache::find_stem_in(const Segment& segment, std::string_view text, uint64_t h) const {
  for (size_t i = h & segment.stem_mask;; i = (i + 1) & segment.stem_mask) {
    const uint32_t slot = load_acquire(segment.stem_slots[i]);
    if (slot == 0) return kMissing;
    const StemEntry& e = stems_[slot - 1];
    if (e.hash == h && e.size == text.size() && std::memcmp(text_.get() + e.offset, text.data(), text.size()) == 0)
      return slot - 1;
  }
}

uint32_t SharedStemCache::find_stem(std::string_view stem) const {
  const uint64_t h = StemCache::hash(stem);
  const size_t open = open_segments();
  for (size_t s = 0; s < open; ++s) {
    const uint32_t id = find_stem_in(segments_[s], stem, h);
    if (id != kMissing) return id;
  }
  return kMissing;
}

void SharedStemCache::settle_one() {
  ThreadShare& me = mine();
  if (me.settled_slot == UINT32_MAX) {
    me.settled_slot = std::min(settled_slots_.fetch_add(1, std::memory_order_acq_rel), kSettledSlots);
  }
  if (me.settled_slot < kSettledSlots) {
    settled_by_thread_[me.settled_slot].ids.fetch_add(1, std::memory_order_release);
  } else {
    settled_.fetch_add(1, std::memory_order_acq_rel);
  }
}

// Each count only grows, and after a close (or the freeze) no id is handed out: a sum of them read
// one after another that reaches the ids handed out means every one of them is settled.
uint64_t SharedStemCache::settled() const {
  uint64_t ids = settled_.load(std::memory_order_acquire);
  const uint32_t slots = std::min(settled_slots_.load(std::memory_order_acquire), kSettledSlots);
  for (uint32_t i = 0; i < slots; ++i) ids += settled_by_thread_[i].ids.load(std::memory_order_acquire);
  return ids;
}

void SharedStemCache::wait_until_settled(uint32_t ids) const {
  for (int spins = 0; settled() < ids; ++spins) {
    if (spins > 64) std::this_thread::yield();
  }
}

bool SharedStemCache::take_token_room(Segment& segment, size_t s) {
  if (!blocks_) return segment.token_count.fetch_add(1, std::memory_order_relaxed) < segment.token_capacity;
  ThreadShare& me = mine();
  if (me.token_segment == s && me.tokens_left > 0) {
    --me.tokens_left;
    return true;
  }
  // Past the capacity by at most a block a thread: the tables have twice its slots.
  const uint32_t before = segment.token_count.fetch_add(kTokenBlock, std::memory_order_relaxed);
  if (before >= segment.token_capacity) return false;
  me.token_segment = s;
  me.tokens_left = std::min(kTokenBlock, segment.token_capacity - before) - 1;
  return true;
}

uint32_t SharedStemCache::find_or_add_stem(size_t open, std::string_view text) {
  const uint64_t h = StemCache::hash(text);
  for (size_t s = 0; s < open; ++s) {  // closed: every id they handed out is in their slots
    const uint32_t id = find_stem_in(segments_[s], text, h);
    if (id != kMissing) return id;
  }
  Segment& segment = segments_[open];
  uint32_t id = kMissing;  // one allocated by this call and not yet published
  // Every id handed out ends settled: published, or left unused (lost race, no room for its text).
  const auto settle = [&](uint32_t result) {
    if (id != kMissing) settle_one();
    return result;
  };
  for (size_t i = h & segment.stem_mask;; i = (i + 1) & segment.stem_mask) {
    uint32_t slot = load_acquire(segment.stem_slots[i]);
    while (slot == 0) {
      if (id == kMissing) {  // an id and the text's room first, then the slot
        uint64_t state = state_.load(std::memory_order_relaxed);
        do {
          if ((state & kFinal) != 0) return kMissing;
          // Closing, or closed and another open: nothing may be added here any more.
          if ((state & kClosing) != 0 || segment_of(state) != open || count_of(state) >= segment.id_limit)
            return kClosed;
        } while (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel));
        id = count_of(state);
        const uint64_t offset = add_text(text);
        if (offset == kNoRoom) return settle(kMissing);  // the id stays unused
        stems_[id] = {h, static_cast<uint32_t>(offset), static_cast<uint32_t>(text.size())};
      }
      if (std::atomic_ref<uint32_t>(segment.stem_slots[i])
              .compare_exchange_strong(slot, id + 1, std::memory_order_acq_rel)) {
        return settle(id);
      }
      // Another thread took the slot first (`slot` now holds its id): compare with that stem.
    }
    const StemEntry& e = stems_[slot - 1];
    if (e.hash == h && e.size == text.size() && std::memcmp(text_.get() + e.offset, text.data(), text.size()) == 0) {
      return settle(slot - 1);  // an id this call allocated, if any, stays unused
    }
  }
}

void SharedStemCache::close_segment(size_t full) {
  const std::lock_guard<std::mutex> lock(closing_);
  uint64_t state = state_.load(std::memory_order_acquire);
  if ((state & kFinal) != 0 || segment_of(state) != full) return;  // frozen, or the next is open already
  state = state_.fetch_or(kClosing, std::memory_order_acq_rel) | kClosing;
  const uint32_t ids = count_of(state);  // no id is handed out past it while it closes
  wait_until_settled(ids);               // then no stem slot of this segment changes again
  const size_t next = full + 1;
  if (next == kMaxSegments || planned_[next] == 0) return freeze();
  try {
    open_segment(next, ids);
  } catch (const std::bad_alloc&) {
    return freeze();
  }
  open_.store(next + 1, std::memory_order_release);
  // A freeze meanwhile (the text area full) stays.
  while (!state_.compare_exchange_weak(state, (state & kFinal) | (uint64_t{next} << kSegmentShift) | ids,
                                       std::memory_order_acq_rel)) {
  }
}

void SharedStemCache::add_token(std::string_view token, uint64_t h, uint32_t stem_id, uint64_t long_text) {
  const uint32_t tag = TokenSlot::tag_of(h);
  for (;;) {
    const uint64_t state = state_.load(std::memory_order_acquire);
    Segment& segment = segments_[segment_of(state)];
    if (!take_token_room(segment, segment_of(state))) {
      if ((state & kFinal) != 0) return;  // no room anywhere: the token stays uncached
      close_segment(segment_of(state));
      continue;
    }
    for (size_t i = h & segment.token_mask;; i = (i + 1) & segment.token_mask) {
      TokenSlot& slot = segment.tokens[i];
      uint32_t seen = published_tag(slot);
      if (seen == 0) {
        if (!std::atomic_ref<uint32_t>(slot.tag).compare_exchange_strong(seen, kBusy, std::memory_order_acquire)) {
          seen = published_tag(slot);  // filled meanwhile: compare with what it holds
        } else {
          slot.stem = stem_id;
          slot.set_token(token, static_cast<uint32_t>(long_text));
          std::atomic_ref<uint32_t>(slot.tag).store(tag, std::memory_order_release);
          return;
        }
      }
      if (seen == tag && slot.holds(token, text_.get())) return;
    }
  }
}

uint32_t SharedStemCache::insert(std::string_view token, uint64_t h, std::string_view stem) {
  for (;;) {
    const uint64_t state = state_.load(std::memory_order_acquire);
    if ((state & kFinal) != 0) return kMissing;
    const size_t open = segment_of(state);
    const uint32_t stem_id = (state & kClosing) != 0 ? kClosed : find_or_add_stem(open, stem);
    if (stem_id == kClosed) {
      close_segment(open);  // or wait for the thread closing it
      continue;
    }
    if (stem_id == kMissing) return kMissing;
    // A token too long for its slot has its text in the text area; with no room there, it stays
    // uncached (its stem's id is right all the same).
    uint64_t long_text = 0;
    if (token.size() > TokenSlot::kInlineBytes && (long_text = add_text(token)) == kNoRoom) return stem_id;
    add_token(token, h, stem_id, long_text);
    return stem_id;
  }
}

}  // namespace warp
