// Compares a processor's top-k with the expected one exactly: the same documents in the same order
// with bit-identical scores. Scores are sums of integer units (common/index/bm25.hpp), exact in any
// order, so every processor, path and partitioning gives one ranking (docs/architecture.md). On a mismatch
// the message gives the reference's score of both documents.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/brute_force.hpp"

namespace warp::testing {

inline ::testing::AssertionResult same_topk(const std::vector<Hit>& expected, const std::vector<Hit>& actual,
                                            const BruteForceIndex& reference, const std::vector<std::string>& terms) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "expected " << expected.size() << " hits, got " << actual.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i].doc == expected[i].doc && actual[i].score == expected[i].score) continue;
    return ::testing::AssertionFailure() << "rank " << i << ": expected doc " << expected[i].doc << " score "
                                         << expected[i].score << ", got doc " << actual[i].doc << " score "
                                         << actual[i].score << " (reference scores "
                                         << reference.score(terms, expected[i].doc) << " and "
                                         << reference.score(terms, actual[i].doc) << ")";
  }
  return ::testing::AssertionSuccess();
}

// The same without a reference: ranked lists identical document for document, score for score.
inline ::testing::AssertionResult identical_hits(const std::vector<Hit>& expected, const std::vector<Hit>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "expected " << expected.size() << " hits, got " << actual.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i].doc != expected[i].doc || actual[i].score != expected[i].score) {
      return ::testing::AssertionFailure()
             << "rank " << i << ": expected doc " << expected[i].doc << " score " << expected[i].score << ", got doc "
             << actual[i].doc << " score " << actual[i].score;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace warp::testing
