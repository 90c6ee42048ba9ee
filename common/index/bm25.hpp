// BM25, the one scorer of Warpsearch. Collection statistics are collection-wide in every
// partition, so a document's score does not depend on how the collection is split.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/index/types.hpp"

namespace warp {

// Defaults measured on Cranfield and CISI (tests/bench/results/relevance.md, relevance_bench): each of
// k1 1.2 / b 0.75, linear query-term frequency and query-time stop words helps on both.
struct Bm25Params {
  float k1 = 1.2f;
  float b = 0.75f;
  // Query-term saturation (Robertson's k3): a term said qtf times in the query weighs
  // (k3 + 1) qtf / (k3 + qtf); 0 counts it once, infinity weighs it by qtf. Query-time only: it
  // changes no stored bound.
  float k3 = std::numeric_limits<float>::infinity();
};

// Throws Error unless k1 >= 0, 0 <= b <= 1 and k3 >= 0 (infinity allowed).
void check_bm25_params(const Bm25Params& params);

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

// BM25's query-term component for a term the query holds `qtf` times.
inline float bm25_query_factor(uint32_t qtf, float k3) {
  const float q = static_cast<float>(qtf);
  return std::isinf(k3) ? q : (k3 + 1.0f) * q / (k3 + q);
}

// One ranking from every processor (docs/architecture.md): a query is scored in units of a power of two,
// 2^-p, chosen per query so that the largest score it could give stays below 2^24 units. Each term
// adds ceil(its BM25 in units), an integer, so every partial sum is an integer below 2^24: exactly
// representable in a float, and float additions are exact in any order (DAAT on the CPU, atomics on
// the GPU, any number of partitions). Ceil, not floor: a matching term always adds at least 1.
// The scale depends only on the query's factors, N and k1, so every partition picks the same one.
inline float bm25_units_per_score(double factor_sum, uint64_t doc_count, const Bm25Params& params) {
  const double largest_weight =
      std::max(1.0, static_cast<double>(bm25_idf(1, std::max<uint64_t>(doc_count, 1)))) * (params.k1 + 1.0) * 1.001;
  int exponent = 0;
  std::frexp(std::max(factor_sum, 1e-6) * largest_weight, &exponent);  // the bound is below 2^exponent
  // + one unit of ceil slack per term: at most 2^23 terms, far beyond any query.
  return std::ldexp(1.0f, std::clamp(23 - exponent, -100, 100));
}

// A query term's BM25 weight in score units (the same float operations for every processor).
inline float bm25_unit_weight(float idf, const Bm25Params& params, float query_factor, float units_per_score) {
  return bm25_term_weight(idf, params) * query_factor * units_per_score;
}

// A posting's score in units: an integer-valued float.
inline Score bm25_units(float unit_weight, TermFreq tf, float length_norm) {
  return std::ceil(bm25_score(unit_weight, tf, length_norm));
}

// A stored bound (block or list maximum, computed with bm25_term_weight) in the units of a query
// term whose unit weight is bm25_term_weight × `bound_scale`: scaled with slack for float rounding,
// plus the one unit that ceil can add.
inline float bm25_unit_bound(float stored_bound, float bound_scale) {
  return stored_bound * bound_scale * (1.0f + 1e-5f) + 1.0f;
}

}  // namespace warp
