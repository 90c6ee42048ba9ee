// A GOV2-like synthetic collection for the GPU query benchmark (issue: Ding et al. §6.3 setup):
// 25,205,179 documents with GOV2's mean length (about 930 terms), Zipfian document frequencies
// (df of term rank r ∝ 1/r, capped at 80% of the documents), and a 1,000-query log of 1–5 terms
// whose average postings per query is calibrated to 3.7 million, as in Ding et al.'s log.
// Only the lists of the log's terms are generated (every query touches only those): a full GOV2
// vocabulary would add billions of postings no query reads. Deterministic for a seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/index/index_view.hpp"

namespace warp::synthetic {

struct Gov2Params {
  uint32_t documents = 25'205'179;
  double mean_length = 930;
  uint32_t queries = 1000;
  double postings_per_query = 3.7e6;  // the calibration target
  uint32_t max_rank = 200'000;        // query terms: log-uniform ranks in [2, max_rank]
  std::string codec = "bp128";
  uint64_t seed = 2009;
  unsigned threads = 0;  // 0: all cores
};

struct Gov2Collection {
  IndexView view;
  std::vector<std::vector<std::string>> queries;
  double postings_per_query = 0;  // measured on the generated lists
  uint64_t postings = 0;          // in the generated lists
};

Gov2Collection make_gov2_like(const Gov2Params& params);

}  // namespace warp::synthetic
