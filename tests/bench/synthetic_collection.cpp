#include "tests/bench/synthetic_collection.hpp"

#include <algorithm>
#include <cmath>

namespace warp::synthetic {

ZipfSampler::ZipfSampler(uint32_t vocabulary, double exponent) : cdf_(vocabulary) {
  double sum = 0;
  for (uint32_t r = 0; r < vocabulary; ++r) cdf_[r] = sum += 1.0 / std::pow(r + 1.0, exponent);
  for (double& c : cdf_) c /= sum;
}

uint32_t ZipfSampler::operator()(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
  return static_cast<uint32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
}

std::vector<std::vector<std::string>> generate_queries(uint32_t count, uint32_t vocabulary, uint32_t max_terms,
                                                       uint64_t seed, uint32_t min_rank) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> length(1, max_terms);
  std::uniform_real_distribution<double> log_rank(std::log(min_rank + 1.0), std::log(static_cast<double>(vocabulary)));
  std::vector<std::vector<std::string>> queries(count);
  for (auto& query : queries) {
    const uint32_t n = length(rng);
    for (uint32_t i = 0; i < n; ++i) {
      query.push_back(term_name(static_cast<uint32_t>(std::exp(log_rank(rng))) - 1));
    }
  }
  return queries;
}

}  // namespace warp::synthetic
