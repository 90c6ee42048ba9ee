#include "common/index/index_view.hpp"

#include <algorithm>

namespace warp {

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
  for (const auto& [term, info] : lexicon) {
    PostingListView view = list(term, info);
    const float weight = bm25_term_weight(bm25_idf(info.df, meta.stats.doc_count), params);
    const std::vector<Posting> list_postings = decode_posting_list(view);
    const uint32_t block_size = view.codec->block_size();
    std::vector<Score> block_max(view.block_count);
    for (uint32_t block = 0; block < view.block_count; ++block) {
      Score best = 0;
      const size_t end = std::min<size_t>(list_postings.size(), (block + 1) * size_t{block_size});
      for (size_t i = block * size_t{block_size}; i < end; ++i) {
        best = std::max(best, bm25_score(weight, list_postings[i].freq, length_norms[list_postings[i].doc - meta.doc_begin]));
      }
      block_max[block] = best;
    }
    rewrite_block_maxima(postings.data() + info.offset, block_max);
  }
}

}  // namespace warp
