#include "leaf/query/posting_cursor.hpp"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace warp {
namespace {
// Mean docID gap above which a block's norms are prefetched when it is decoded (tried: 1, 4, 8, 32,
// 64, 128, 256, 1,024 on the GOV2-like preset; 128–256 ran fastest, 1–8 slower than 64).
constexpr uint32_t kSparseGap = 128;

#if defined(__x86_64__)
// BM25 units of `count` postings, eight at a time where the CPU has AVX2 (a gather of the length
// norms, a vector ceil). The same results as bm25_units, lane for lane: the same multiplication,
// addition, division and ceil, each correctly rounded (frequencies and docIDs stay below 2^31).
__attribute__((target("avx2"))) void score_postings_avx2(float unit_weight, const uint32_t* docs, const uint32_t* freqs,
                                                         uint32_t count, const float* norms, DocId doc_begin,
                                                         float* out) {
  const __m256 weight = _mm256_set1_ps(unit_weight);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i base = _mm256_set1_epi32(static_cast<int>(doc_begin));
  uint32_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i tf = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(freqs + i)), one);
    const __m256i slot = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(docs + i)), base);
    const __m256 f = _mm256_cvtepi32_ps(tf);
    const __m256 norm = _mm256_i32gather_ps(norms, slot, 4);
    const __m256 score = _mm256_div_ps(_mm256_mul_ps(weight, f), _mm256_add_ps(f, norm));
    _mm256_storeu_ps(out + i, _mm256_round_ps(score, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
  }
  for (; i < count; ++i) out[i] = bm25_units(unit_weight, freqs[i] + 1, norms[docs[i] - doc_begin]);
}
#endif

void score_postings(float unit_weight, const uint32_t* docs, const uint32_t* freqs, uint32_t count, const float* norms,
                    DocId doc_begin, float* out) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return score_postings_avx2(unit_weight, docs, freqs, count, norms, doc_begin, out);
#endif
  for (uint32_t i = 0; i < count; ++i) out[i] = bm25_units(unit_weight, freqs[i] + 1, norms[docs[i] - doc_begin]);
}

}  // namespace

PostingCursor::PostingCursor(const PostingListView& list, const float* length_norms, DocId doc_begin,
                             TermScoring scoring, CursorStats* stats)
    : list_(list),
      length_norms_(length_norms),
      doc_begin_(doc_begin),
      scoring_(scoring),
      max_score_(bm25_unit_bound(list.max_score, scoring.bound_scale)),
      stats_(stats),
      doc_decoder_(list.codec->decoder(list.docs)),
      freq_decoder_(list.freq_codec->decoder(list.freqs)),
      docs_(list.codec->block_size()),
      freqs_(list.codec->block_size()) {
  stats_->blocks_total += list.block_count;
  advance_block(0);
}

namespace {
// docs[i] = previous + Σ_{j≤i} (docs[j] + 1): a block's gaps (each stored less one) to docIDs,
// with `previous` the last docID before the block (kEndDoc before the first: the sum wraps to the
// gap). Four lanes at a time with SSE2, a log-step scan per vector and the carry broadcast on:
// the serial loop was a chain of dependent additions through every posting of every block.
void gaps_to_docids(uint32_t* docs, uint32_t count, DocId previous) {
  uint32_t i = 0;
#if defined(__SSE2__)
  const __m128i one = _mm_set1_epi32(1);
  __m128i carry = _mm_set1_epi32(static_cast<int>(previous));
  for (; i + 4 <= count; i += 4) {
    __m128i x = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(docs + i)), one);
    x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
    x = _mm_add_epi32(x, _mm_slli_si128(x, 8));
    x = _mm_add_epi32(x, carry);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(docs + i), x);
    carry = _mm_shuffle_epi32(x, _MM_SHUFFLE(3, 3, 3, 3));
  }
  if (i > 0) previous = docs[i - 1];
#endif
  for (; i < count; ++i) docs[i] = previous = previous + docs[i] + 1;
}
}  // namespace

void PostingCursor::advance_block(uint32_t block) {
  block_ = block;
  position_ = 0;
  if (block >= list_.block_count) {
    block_docs_ = 0;
    doc_ = kEndDoc;
    return;
  }
  const uint32_t block_size = list_.codec->block_size();
  block_docs_ = std::min(block_size, list_.count - block * block_size);
  doc_decoder_->decode_block(block, docs_.data());
  gaps_to_docids(docs_.data(), block_docs_, block == 0 ? kEndDoc : list_.block_last_docid[block - 1]);
  doc_ = docs_[0];
  // A sparse block's postings are scored over the many tiles (or pivots) its docIDs span, each
  // posting's length norm a cache line of its own in a partition of millions of documents: ask for
  // them now, so that scoring does not wait on memory for each (on a GOV2-sized partition the
  // norms' misses were half of the tiled OR's scoring time; -17% a search on the development VM).
  // Dense blocks are left to the hardware's prefetcher: their norms share lines and are read soon.
  // No norms (a cursor that reads docIDs only: constraints, facets): nothing to ask for.
  if (length_norms_ != nullptr && docs_[block_docs_ - 1] - doc_ > kSparseGap * block_docs_) {
    for (uint32_t i = 0; i < block_docs_; ++i) __builtin_prefetch(length_norms_ + (docs_[i] - doc_begin_));
  }
  stats_->blocks_decoded += 1;
  stats_->postings_decoded += block_docs_;
}

void PostingCursor::next_geq(DocId target) {
  if (doc_ >= target) return;
  if (list_.block_last_docid[block_] < target) {
    uint32_t block = block_ + 1;
    while (block < list_.block_count && list_.block_last_docid[block] < target) ++block;
    advance_block(block);
    if (doc_ >= target) return;
  }
  // The target lies in the current block: its last docID is >= target.
  while (docs_[position_] < target) ++position_;
  doc_ = docs_[position_];
}

Score PostingCursor::shallow_range_max(DocId begin, DocId end) {
  shallow_next_geq(begin);
  if (shallow_block_ >= list_.block_count) return 0;
  Score largest = 0;
  for (uint32_t block = shallow_block_; block < list_.block_count; ++block) {
    largest = std::max(largest, list_.block_max_score[block]);
    if (list_.block_last_docid[block] >= end - 1) break;  // the next block begins at end or later
  }
  return bm25_unit_bound(largest, scoring_.bound_scale);
}

void PostingCursor::accumulate(DocId begin, DocId end, Score* acc, uint64_t* touched) {
  next_geq(begin);
  while (doc_ < end) {
    if (freq_block_ != block_) {
      freq_decoder_->decode_block(block_, freqs_.data());
      freq_block_ = block_;
    }
    const uint32_t* docs = docs_.data();
    const uint32_t* freqs = freqs_.data();
    // The block's postings below end: all of them, or up to the first at or past end.
    uint32_t stop = block_docs_;
    if (docs[stop - 1] >= end) {
      stop = position_;
      while (docs[stop] < end) ++stop;
    }
    for (uint32_t from = position_; from < stop; from += 64) {
      const uint32_t count = std::min<uint32_t>(64, stop - from);
      Score scores[64];
      score_postings(scoring_.unit_weight, docs + from, freqs + from, count, length_norms_, doc_begin_, scores);
      for (uint32_t i = 0; i < count; ++i) {
        const uint32_t slot = docs[from + i] - begin;
        acc[slot] += scores[i];
        touched[slot >> 6] |= uint64_t{1} << (slot & 63);
      }
    }
    if (stop < block_docs_) {
      position_ = stop;
      doc_ = docs[stop];
      return;
    }
    advance_block(block_ + 1);
  }
}

TermFreq PostingCursor::freq() {
  if (freq_block_ != block_) {
    freq_decoder_->decode_block(block_, freqs_.data());
    freq_block_ = block_;
  }
  return freqs_[position_] + 1;
}

}  // namespace warp
