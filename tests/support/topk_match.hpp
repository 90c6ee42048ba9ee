// Compares a processor's top-k with the reference's: same length; rank by rank the scores agree
// within 1e-5 relative; every returned document's reported score is its true score; no document
// twice. Documents may differ only where scores tie within that tolerance.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "tests/support/brute_force.hpp"

namespace warp::testing {

inline bool close_scores(Score a, Score b) {
  return std::fabs(a - b) <= 1e-5f * std::max({1.0f, std::fabs(a), std::fabs(b)});
}

inline ::testing::AssertionResult same_topk(const std::vector<Hit>& expected, const std::vector<Hit>& actual,
                                            const BruteForceIndex& reference, const std::vector<std::string>& terms) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "expected " << expected.size() << " hits, got " << actual.size();
  }
  std::set<DocId> seen;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!seen.insert(actual[i].doc).second) return ::testing::AssertionFailure() << "doc " << actual[i].doc << " twice";
    if (!close_scores(expected[i].score, actual[i].score)) {
      return ::testing::AssertionFailure() << "rank " << i << ": expected doc " << expected[i].doc << " score "
                                           << expected[i].score << ", got doc " << actual[i].doc << " score "
                                           << actual[i].score;
    }
    if (actual[i].doc == expected[i].doc) continue;  // the reference's own score, checked above
    const Score truth = reference.score(terms, actual[i].doc);  // a tie broken otherwise: rescore
    if (!close_scores(truth, actual[i].score)) {
      return ::testing::AssertionFailure() << "rank " << i << ": doc " << actual[i].doc << " reported score "
                                           << actual[i].score << " but its BM25 score is " << truth;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace warp::testing
