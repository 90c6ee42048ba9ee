// Synthetic collections for tests and benchmarks: Zipfian term frequencies over a parameterised
// vocabulary, document lengths drawn around a mean, and query logs drawn from the vocabulary.
// Deterministic for a given seed.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace warp::synthetic {

struct CollectionParams {
  uint32_t documents = 10000;
  uint32_t vocabulary = 50000;
  double mean_length = 100;    // terms per document (geometric-ish spread, at least 1)
  double zipf_exponent = 1.0;  // term rank r has probability ∝ 1 / r^s
  uint64_t seed = 1;
};

// Draws term ranks from a Zipf distribution by inverse CDF.
class ZipfSampler {
 public:
  ZipfSampler(uint32_t vocabulary, double exponent);
  uint32_t operator()(std::mt19937_64& rng) const;

 private:
  std::vector<double> cdf_;
};

inline std::string term_name(uint32_t rank) { return "t" + std::to_string(rank); }

// Calls on_document(terms) for each document in order; terms are term names.
template <class OnDocument>
void generate_collection(const CollectionParams& params, OnDocument&& on_document) {
  std::mt19937_64 rng(params.seed);
  ZipfSampler zipf(params.vocabulary, params.zipf_exponent);
  std::gamma_distribution<double> length(2.0, params.mean_length / 2.0);
  std::vector<std::string> terms;
  for (uint32_t d = 0; d < params.documents; ++d) {
    const auto n = static_cast<uint32_t>(std::max(1.0, length(rng)));
    terms.clear();
    for (uint32_t i = 0; i < n; ++i) terms.push_back(term_name(zipf(rng)));
    on_document(terms);
  }
}

// Queries of 1..max_terms terms; term ranks drawn uniformly from [min_rank, vocabulary) in log
// space, so that queries mix frequent and rare terms as real logs do.
std::vector<std::vector<std::string>> generate_queries(uint32_t count, uint32_t vocabulary, uint32_t max_terms,
                                                       uint64_t seed, uint32_t min_rank = 0);

}  // namespace warp::synthetic
