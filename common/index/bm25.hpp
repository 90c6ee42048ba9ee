// BM25, the one scorer of Warpsearch. Collection statistics are collection-wide in every
// partition, so a document's score does not depend on how the collection is split.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/index/types.hpp"

namespace warp {

struct Bm25Params {
  float k1 = 0.9f;
  float b = 0.4f;
};

struct CollectionStats {
  uint64_t doc_count = 0;     // N over the whole generation
  uint64_t total_length = 0;  // sum of document lengths (analyzed terms) over the generation
  double average_length() const {
    return doc_count == 0 ? 1.0 : static_cast<double>(total_length) / static_cast<double>(doc_count);
  }
};

// Lucene's non-negative idf: log(1 + (N - df + 0.5) / (df + 0.5)). Non-negative term scores keep
// the dynamic-pruning upper bounds valid.
inline float bm25_idf(uint64_t df, uint64_t doc_count) {
  const double n = static_cast<double>(doc_count), d = static_cast<double>(df);
  return static_cast<float>(std::log(1.0 + (n - d + 0.5) / (d + 0.5)));
}

// The per-term weight idf * (k1 + 1), computed once per query term.
inline float bm25_term_weight(float idf, const Bm25Params& params) { return idf * (params.k1 + 1.0f); }

// k1 * (1 - b + b * len / avglen), computed once per document at load.
inline float bm25_length_norm(uint32_t length, double average_length, const Bm25Params& params) {
  return static_cast<float>(params.k1 * (1.0 - params.b + params.b * length / average_length));
}

inline Score bm25_score(float term_weight, TermFreq tf, float length_norm) {
  const float f = static_cast<float>(tf);
  return term_weight * f / (f + length_norm);
}

}  // namespace warp
