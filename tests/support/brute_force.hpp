// The reference for query processing: uncompressed documents, every document scored with BM25
// from scratch, top-k by full sort. Slow and obviously right.
#pragma once
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index/bm25.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp::testing {

class BruteForceIndex {
 public:
  explicit BruteForceIndex(Bm25Params params = {}) : params_(params) {}

  void add(const std::vector<std::string>& terms) {
    std::map<std::string, uint32_t> counts;
    for (const auto& t : terms) ++counts[t];
    const DocId doc = static_cast<DocId>(lengths_.size());
    for (const auto& [term, freq] : counts) postings_[term].push_back({doc, freq});
    lengths_.push_back(static_cast<uint32_t>(terms.size()));
    total_length_ += terms.size();
  }

  // The exact BM25 score of `doc` for the distinct terms of `terms`.
  Score score(const std::vector<std::string>& terms, DocId doc) const {
    Score total = 0;
    for (const auto& term : distinct(terms)) {
      auto it = postings_.find(term);
      if (it == postings_.end()) continue;
      for (const Posting& p : it->second) {
        if (p.doc == doc) total += bm25_score(weight(it->second.size()), p.freq, norm(doc));
      }
    }
    return total;
  }

  std::vector<Hit> search(const std::vector<std::string>& terms, QueryMode mode, size_t k) const {
    const std::vector<std::string> unique = distinct(terms);
    std::vector<Score> scores(lengths_.size(), 0);
    std::vector<uint32_t> matched(lengths_.size(), 0);
    size_t present = 0;
    for (const auto& term : unique) {
      auto it = postings_.find(term);
      if (it == postings_.end()) continue;
      ++present;
      for (const Posting& p : it->second) {
        scores[p.doc] += bm25_score(weight(it->second.size()), p.freq, norm(p.doc));
        ++matched[p.doc];
      }
    }
    std::vector<Hit> and_hits, or_hits;
    for (DocId d = 0; d < lengths_.size(); ++d) {
      if (matched[d] == 0) continue;
      or_hits.push_back({d, scores[d]});
      if (present == unique.size() && matched[d] == unique.size()) and_hits.push_back({d, scores[d]});
    }
    std::vector<Hit>& chosen =
        mode == QueryMode::kOr || (mode == QueryMode::kAndOr && and_hits.size() < k) ? or_hits : and_hits;
    std::sort(chosen.begin(), chosen.end(), ranks_before);
    if (chosen.size() > k) chosen.resize(k);
    return chosen;
  }

  size_t and_matches(const std::vector<std::string>& terms) const {
    std::vector<std::string> unique = distinct(terms);
    std::vector<uint32_t> matched(lengths_.size(), 0);
    for (const auto& term : unique) {
      auto it = postings_.find(term);
      if (it == postings_.end()) return 0;
      for (const Posting& p : it->second) ++matched[p.doc];
    }
    return static_cast<size_t>(std::count(matched.begin(), matched.end(), unique.size()));
  }

 private:
  static std::vector<std::string> distinct(const std::vector<std::string>& terms) {
    std::set<std::string> s(terms.begin(), terms.end());
    return {s.begin(), s.end()};
  }
  float weight(size_t df) const { return bm25_term_weight(bm25_idf(df, lengths_.size()), params_); }
  float norm(DocId doc) const {
    const CollectionStats stats{lengths_.size(), total_length_};
    return bm25_length_norm(lengths_[doc], stats.average_length(), params_);
  }

  Bm25Params params_;
  std::unordered_map<std::string, std::vector<Posting>> postings_;
  std::vector<uint32_t> lengths_;
  uint64_t total_length_ = 0;
};

}  // namespace warp::testing
