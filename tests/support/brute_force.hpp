// The reference for query processing: uncompressed documents, every document scored with BM25
// from scratch, top-k by full sort. Slow and obviously right.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index/bm25.hpp"
#include "common/query/filter.hpp"
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

  // The exact BM25 score of `doc` for `terms` (repeats raise a term's query-term frequency), in
  // the query's score units (bm25.hpp) converted back to a score.
  Score score(const std::vector<std::string>& terms, DocId doc) const {
    const Weights w = weights(terms);
    Score total = 0;
    for (const auto& [term, unit_weight] : w.unit_weights) {
      for (const Posting& p : postings_.at(term)) {
        if (p.doc == doc) total += bm25_units(unit_weight, p.freq, norm(doc));
      }
    }
    return total * w.score_of_unit;
  }

  // Whether a document passes a query's filter (Query::filter): the test's own reading of the
  // documents' fields. Unset: a filtered query allows nothing.
  std::function<bool(const FilterNode&, DocId)> filter_allows;
  // Whether a document holds a phrase (Query::phrases): the test's own reading of its words.
  // Unset: a query with phrases allows nothing.
  std::function<bool(const std::vector<std::string>&, DocId)> phrase_holds;

  std::vector<Hit> search(const std::vector<std::string>& terms, QueryMode mode, size_t k) const {
    return search(Query(terms, mode, k));
  }

  // Whether a document passes the query syntax's constraints (Query::required, Query::excluded):
  // it holds every required term and not every term of any excluded group.
  bool allowed(const Query& query, DocId doc) const {
    const auto holds = [&](const std::string& term) {
      auto it = postings_.find(term);
      if (it == postings_.end()) return false;
      auto at = std::lower_bound(it->second.begin(), it->second.end(), doc,
                                 [](const Posting& p, DocId d) { return p.doc < d; });
      return at != it->second.end() && at->doc == doc;
    };
    if (!std::all_of(query.required.begin(), query.required.end(), holds)) return false;
    if (query.filter && !(filter_allows && filter_allows(*query.filter, doc))) return false;
    for (const std::vector<std::string>& group : query.excluded)
      if (!group.empty() && std::all_of(group.begin(), group.end(), holds)) return false;
    const auto has_phrase = [&](const std::vector<std::string>& phrase) {
      return phrase_holds && phrase_holds(phrase, doc);
    };
    if (!std::all_of(query.phrases.begin(), query.phrases.end(), has_phrase)) return false;
    if (std::any_of(query.excluded_phrases.begin(), query.excluded_phrases.end(), has_phrase)) return false;
    return true;
  }

  // The top k of the documents the query's constraints allow (its terms' counts ignored: repeats
  // in `terms` give the query-term frequencies).
  std::vector<Hit> search(const Query& query) const {
    const std::vector<std::string>& terms = query.terms;
    const QueryMode mode = query.mode;
    const size_t k = query.k;
    const Weights w = weights(terms);
    std::vector<Score> scores(lengths_.size(), 0);
    std::vector<uint32_t> matched(lengths_.size(), 0);
    for (const auto& [term, unit_weight] : w.unit_weights) {
      for (const Posting& p : postings_.at(term)) {
        scores[p.doc] += bm25_units(unit_weight, p.freq, norm(p.doc));
        ++matched[p.doc];
      }
    }
    const size_t distinct_terms = w.unit_weights.size() + w.missing;
    std::vector<Hit> and_hits, or_hits;
    for (DocId d = 0; d < lengths_.size(); ++d) {
      if (matched[d] == 0 || (query.constrained() && !allowed(query, d))) continue;
      or_hits.push_back({d, scores[d] * w.score_of_unit});
      if (w.missing == 0 && matched[d] == distinct_terms) and_hits.push_back({d, scores[d] * w.score_of_unit});
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
  // Query-term frequencies, the query's score units and each present term's weight in them, as
  // bm25.hpp defines them.
  struct Weights {
    std::map<std::string, float> unit_weights;  // terms of the collection
    size_t missing = 0;                         // distinct terms of no document
    float score_of_unit = 1;
  };
  Weights weights(const std::vector<std::string>& terms) const {
    std::map<std::string, uint32_t> qtf;
    for (const auto& t : terms) ++qtf[t];
    double factor_sum = 0;
    for (const auto& [term, count] : qtf) factor_sum += bm25_query_factor(count, params_.k3);
    const float units = bm25_units_per_score(factor_sum, lengths_.size(), params_);
    Weights w;
    w.score_of_unit = 1.0f / units;
    for (const auto& [term, count] : qtf) {
      auto it = postings_.find(term);
      if (it == postings_.end()) {
        ++w.missing;
        continue;
      }
      const float idf = bm25_idf(it->second.size(), lengths_.size());
      w.unit_weights[term] = bm25_unit_weight(idf, params_, bm25_query_factor(count, params_.k3), units);
    }
    return w;
  }
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
