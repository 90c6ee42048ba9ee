// Tiled OR: MaxScore over docID tiles, each tile scored term-at-a-time into an accumulator array.
// DAAT with dynamic pruning (BlockMax-WAND, MaxScore) pays per document: a pivot search, cursor
// moves, a re-sort. On lists whose scores are flat (frequent terms in short documents) no bound
// rules a block out, and that per-document cost is the query's whole cost. Here a tile of 512 to
// 4,096 docIDs is skipped when the summed block maxima of its lists cannot enter the top-k;
// otherwise the lists that can (the essential ones, MaxScore's split by the tile's bounds) add
// their postings' scores into the tile's accumulators in one tight loop per block, and the
// candidates, visited in docID order, are completed by probing the non-essential lists only while
// they can still enter. The GPU's OR tiles (leaf/gpu/or_tiles.cu) at a CPU's scale. Exact: scores
// are integer-valued floats (bm25.hpp), so the order of additions does not matter, and documents
// reach the top-k queue in increasing docID order, as in DAAT.
#include <algorithm>
#include <array>
#include <bit>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "leaf/query/algorithms.hpp"

namespace warp {
namespace {
// Postings a tile should hold on average: smaller tiles bound more tightly (the default corpus ran
// fastest at 512–1,024 docIDs), but each costs a bound per list and a pass over its lists whatever
// they hold (the GOV2-like preset ran fastest at 4,096).
constexpr uint64_t kTilePostings = 500;
constexpr uint32_t kMinTile = 512, kMaxTile = 4096;

// Of a word's 64 accumulators, those whose score + rest is above `threshold`: bit i for slot i.
// The candidates of a tile were tested one touched slot after another, each a dependent chain of
// loads (the slot, the queue's state) that most of them fail once the queue is full; four slots a
// compare here, the same float additions and comparison as the scalar test.
uint64_t above(const Score* slots, Score rest, Score threshold) {
#if defined(__SSE2__)
  const __m128 r = _mm_set1_ps(rest), t = _mm_set1_ps(threshold);
  uint64_t mask = 0;
  for (int i = 0; i < 64; i += 4) {
    const __m128 sum = _mm_add_ps(_mm_loadu_ps(slots + i), r);
    mask |= static_cast<uint64_t>(_mm_movemask_ps(_mm_cmpgt_ps(sum, t))) << i;
  }
  return mask;
#else
  uint64_t mask = 0;
  for (int i = 0; i < 64; ++i) mask |= static_cast<uint64_t>(slots[i] + rest > threshold) << i;
  return mask;
#endif
}

// Zeroes a word's 64 accumulators (a memset of 256 bytes became `rep stos`, whose start-up cost
// was a tenth of the tiled OR's samples).
void zero_word(Score* slots) {
#if defined(__SSE2__)
  for (int i = 0; i < 64; i += 4) _mm_storeu_ps(slots + i, _mm_setzero_ps());
#else
  std::fill(slots, slots + 64, Score{0});
#endif
}

// Bit w set where touched[w] != 0, for `count` <= 64 words: the candidate loop visits only those.
// A sparse tile (rare terms over millions of documents) touches a few of its 64 words, and a
// branch per word mispredicted on most of them; this pass has no branch but the loop's (an SSE2
// version ran no faster).
uint64_t nonzero_words(const uint64_t* touched, uint32_t count) {
  uint64_t mask = 0;
  for (uint32_t w = 0; w < count; ++w) mask |= static_cast<uint64_t>(touched[w] != 0) << w;
  return mask;
}

// Whether six or more slots of a word were touched: below that, testing them one by one is
// cheaper than a pass over all 64. (std::popcount is a library call without -mpopcnt.)
bool dense_word(uint64_t bits) {
  for (int i = 0; i < 5; ++i) bits &= bits - 1;
  return bits != 0;
}
}  // namespace

void tiled_or_query(std::vector<PostingCursor*> cursors, TopkQueue& topk) {
  if (cursors.empty()) return;
  // Lowest list maximum first: a tile's non-essential lists are a prefix of this order.
  std::sort(cursors.begin(), cursors.end(), [](auto* a, auto* b) { return a->max_score() < b->max_score(); });
  const size_t n = cursors.size();
  DocId first = kEndDoc, last = 0;
  uint64_t postings = 0;
  for (PostingCursor* cursor : cursors) {
    first = std::min(first, cursor->docid());
    if (cursor->docid() != kEndDoc) last = std::max(last, cursor->last_docid());
    postings += cursor->size();
  }
  if (first == kEndDoc) return;
  const uint64_t span = uint64_t{last} - first + 1;
  const uint32_t tile =
      static_cast<uint32_t>(std::clamp<uint64_t>(std::bit_ceil(kTilePostings * span / postings), kMinTile, kMaxTile));
  std::vector<Score> below(n);  // below[i]: the summed tile bounds of lists 0..i
  std::vector<Score> acc(tile, 0);
  std::array<uint64_t, kMaxTile / 64> touched{};

  DocId begin = first;
  while (begin != kEndDoc) {
    const DocId end = begin > kEndDoc - tile ? kEndDoc : begin + tile;
    Score total = 0;
    for (size_t i = 0; i < n; ++i) {
      below[i] = total += cursors[i]->docid() >= end ? 0 : cursors[i]->shallow_range_max(begin, end) * kBoundSlack;
    }
    if (topk.would_enter(total)) {
      size_t essential = 0;  // lists [essential, n) propose candidates
      while (essential < n && !topk.would_enter(below[essential])) ++essential;
      for (size_t i = essential; i < n; ++i) cursors[i]->accumulate(begin, end, acc.data(), touched.data());
      const Score rest = essential ? below[essential - 1] : 0;
      for (uint64_t words = nonzero_words(touched.data(), tile / 64); words != 0; words &= words - 1) {
        const uint32_t word = static_cast<uint32_t>(std::countr_zero(words));
        uint64_t bits = touched[word];
        touched[word] = 0;
        Score* const slots = acc.data() + word * 64;
        // Only the candidates: the threshold only rises while the word's are inserted, so the
        // exact test below still runs on each of them.
        const bool dense = dense_word(bits);
        if (dense && topk.full()) bits &= above(slots, rest, topk.threshold());
        for (; bits != 0; bits &= bits - 1) {
          const uint32_t slot = static_cast<uint32_t>(std::countr_zero(bits));
          Score score = slots[slot];
          if (!dense) slots[slot] = 0;
          if (!topk.would_enter(score + rest)) continue;
          const DocId doc = begin + word * 64 + slot;
          for (size_t i = essential; i-- > 0;) {
            if (!topk.would_enter(score + below[i])) break;
            cursors[i]->next_geq(doc);
            if (cursors[i]->docid() == doc) score += cursors[i]->score();
          }
          topk.insert(score, doc);
        }
        if (dense) zero_word(slots);
      }
    }
    if (end == kEndDoc) break;
    // The next tile begins at the first docID at or past `end` that any list may hold.
    DocId next = kEndDoc;
    for (PostingCursor* cursor : cursors) {
      const DocId doc = cursor->docid();
      next = std::min(next, doc >= end ? doc : cursor->last_docid() >= end ? end : kEndDoc);
    }
    begin = next;
  }
}

}  // namespace warp
