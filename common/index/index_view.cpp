#include "common/index/index_view.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

namespace warp {

void compute_rank_floors(std::span<const Score> scores, std::span<const Score> block_maxima, size_t block_size,
                         std::vector<Score>& floors) {
  floors.clear();
  size_t ranks = 0;
  while (ranks < kRankFloors.size() && kRankFloors[ranks] <= scores.size()) ++ranks;
  if (ranks == 0) return;
  const size_t rank_max = kRankFloors[ranks - 1];
  Score low = 0, largest = 0;
  if (block_maxima.empty()) {  // the encoder and rescore pass block maxima; without, one more pass
    largest = std::max(Score{0}, *std::max_element(scores.begin(), scores.end()));
  } else {
    largest = *std::max_element(block_maxima.begin(), block_maxima.end());
    if (block_maxima.size() >= rank_max) {
      // rank_max blocks reach their maxima: one posting each scores at least the rank_max-th largest.
      thread_local std::vector<Score> maxima;
      maxima.assign(block_maxima.begin(), block_maxima.end());
      std::nth_element(maxima.begin(), maxima.begin() + static_cast<std::ptrdiff_t>(rank_max - 1), maxima.end(),
                       std::greater<Score>());
      low = maxima[rank_max - 1];
    }
  }
  constexpr uint32_t kBuckets = 256;
  const float per_score = largest > low ? kBuckets / (largest - low) : 0;
  // Two tables, alternate postings: a run of postings in one bucket (scores cluster) is not one
  // chain of increments through memory.
  std::array<std::array<uint32_t, kBuckets>, 2> counts{};
  const auto count = [&](const Score* first, size_t n) {
    constexpr size_t kStep = 256;
    std::array<uint8_t, kStep> bucket;
    for (size_t done = 0; done < n; done += kStep) {
      const size_t m = std::min(kStep, n - done);
      const Score* at = first + done;
      // The buckets first, a vector loop (a score below the low end clamps to 0 and is not counted).
      for (size_t j = 0; j < m; ++j)
        bucket[j] = static_cast<uint8_t>(std::clamp((at[j] - low) * per_score, 0.0f, 255.0f));
      size_t j = 0;
      for (; j + 2 <= m; j += 2) {
        counts[0][bucket[j]] += at[j] >= low;
        counts[1][bucket[j + 1]] += at[j + 1] >= low;
      }
      if (j < m) counts[0][bucket[j]] += at[j] >= low;
    }
  };
  if (low > 0) {
    // Only the blocks whose maximum reaches the low end hold postings to count: about rank_max
    // blocks of a list of any length.
    for (size_t b = 0; b < block_maxima.size(); ++b) {
      if (block_maxima[b] < low) continue;
      const size_t first = b * block_size;
      count(scores.data() + first, std::min(scores.size(), first + block_size) - first);
    }
  } else {
    count(scores.data(), scores.size());
  }
  // A posting in bucket b scores at least low + b / per_score, less the roundings of the
  // subtraction and the product that placed it (a relative 2^-22 at most; 2^-20 taken), computed
  // in double and rounded down to a float.
  const auto edge = [&](uint32_t bucket) {
    const double at = low + (per_score > 0 ? bucket / double{per_score} * (1 - 0x1p-20) : 0.0);
    return std::max(std::nextafter(static_cast<Score>(at), Score{0}), Score{0});
  };
  uint32_t counted = 0;
  for (uint32_t bucket = kBuckets; bucket-- > 0 && floors.size() < ranks;) {
    counted += counts[0][bucket] + counts[1][bucket];
    while (floors.size() < ranks && counted >= kRankFloors[floors.size()]) floors.push_back(edge(bucket));
  }
}

void IndexView::compute_length_norms() {
  const double average = meta.stats.average_length();
  length_norms.resize(doc_lengths.size());
  for (size_t i = 0; i < doc_lengths.size(); ++i)
    length_norms[i] = bm25_length_norm(doc_lengths[i], average, meta.bm25);
}

void IndexView::rescore(const Bm25Params& params) {
  const bool same_bounds = params.k1 == meta.bm25.k1 && params.b == meta.bm25.b;
  meta.bm25 = params;  // k3 is query-time: it changes no bound
  if (same_bounds) return;
  compute_length_norms();
  std::vector<Score> scores, floors;
  for (const auto& [term, info] : lexicon) {
    PostingListView view = list(term, info);
    const float weight = bm25_term_weight(bm25_idf(info.df, meta.stats.doc_count), params);
    const std::vector<Posting> list_postings = decode_posting_list(view);
    const uint32_t block_size = view.codec->block_size();
    scores.resize(list_postings.size());
    for (size_t i = 0; i < list_postings.size(); ++i) {
      scores[i] = bm25_score(weight, list_postings[i].freq, length_norms[list_postings[i].doc - meta.doc_begin]);
    }
    std::vector<Score> block_max(view.block_count);
    for (uint32_t block = 0; block < view.block_count; ++block) {
      const size_t end = std::min<size_t>(scores.size(), (block + 1) * size_t{block_size});
      block_max[block] = *std::max_element(scores.begin() + block * size_t{block_size},
                                           scores.begin() + static_cast<std::ptrdiff_t>(end));
    }
    rewrite_block_maxima(postings.data() + info.offset, block_max);
    // The rank floors too: they were the index's k1 and b's (the best postings need nothing: they
    // are documents, scored by each query).
    if (info.rank_count > 0) {
      compute_rank_floors(scores, block_max, block_size, floors);
      std::copy_n(floors.begin(), std::min<size_t>(info.rank_count, floors.size()),
                  term_rank_floors.begin() + info.ranks);
    }
  }
}

}  // namespace warp
