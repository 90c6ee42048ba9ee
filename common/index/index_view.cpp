#include "common/index/index_view.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace warp {

void compute_rank_floors(std::span<const Score> scores, std::vector<Score>& floors) {
  floors.clear();
  size_t ranks = 0;
  while (ranks < kRankFloors.size() && kRankFloors[ranks] <= scores.size()) ++ranks;
  if (ranks == 0) return;
  constexpr uint32_t kBuckets = 256;
  Score largest = 0;
  for (const Score score : scores) largest = std::max(largest, score);
  std::array<uint32_t, kBuckets> counts{};
  std::array<Score, kBuckets> lowest;
  lowest.fill(std::numeric_limits<Score>::infinity());
  const float per_score = largest > 0 ? kBuckets / largest : 0;
  for (const Score score : scores) {
    const uint32_t bucket = std::min(kBuckets - 1, static_cast<uint32_t>(score * per_score));
    ++counts[bucket];
    lowest[bucket] = std::min(lowest[bucket], score);
  }
  // Whatever bucket a rounding put a score in, every posting counted so far scores at least `low`.
  uint32_t counted = 0;
  Score low = std::numeric_limits<Score>::infinity();
  for (uint32_t bucket = kBuckets; bucket-- > 0 && floors.size() < ranks;) {
    counted += counts[bucket];
    low = std::min(low, lowest[bucket]);
    while (floors.size() < ranks && counted >= kRankFloors[floors.size()]) floors.push_back(low);
  }
}

void IndexView::compute_length_norms() {
  const double average = meta.stats.average_length();
  length_norms.resize(doc_lengths.size());
  for (size_t i = 0; i < doc_lengths.size(); ++i) length_norms[i] = bm25_length_norm(doc_lengths[i], average, meta.bm25);
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
      block_max[block] = *std::max_element(scores.begin() + block * size_t{block_size}, scores.begin() + static_cast<std::ptrdiff_t>(end));
    }
    rewrite_block_maxima(postings.data() + info.offset, block_max);
    // The rank floors too: they were the index's k1 and b's (the best postings need nothing: they
    // are documents, scored by each query).
    if (info.rank_count > 0) {
      compute_rank_floors(scores, floors);
      std::copy_n(floors.begin(), info.rank_count, term_rank_floors.begin() + info.ranks);
    }
  }
}

}  // namespace warp
