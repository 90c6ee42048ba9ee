// A query's scoring on one partition, shared by the CPU and GPU processors so both weigh and
// bound every term with the same float operations (the "one ranking" invariant, DESIGN.md).
#include <algorithm>
#include <map>

#include "common/util/status.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp {

std::vector<QueryTerm> distinct_terms(const Query& query) {
  if (!query.counts.empty() && query.counts.size() != query.terms.size()) {
    throw Error("a query has " + std::to_string(query.terms.size()) + " terms but " +
                std::to_string(query.counts.size()) + " counts");
  }
  std::map<std::string_view, uint64_t> counts;
  for (size_t i = 0; i < query.terms.size(); ++i) {
    const uint32_t count = query.counts.empty() ? 1 : query.counts[i];
    if (count == 0) throw Error("query term '" + query.terms[i] + "' has a count of 0");
    counts[query.terms[i]] += count;
  }
  std::vector<QueryTerm> terms;
  terms.reserve(counts.size());
  for (const auto& [text, count] : counts) {
    terms.push_back({std::string(text), static_cast<uint32_t>(std::min<uint64_t>(count, UINT32_MAX))});
  }
  return terms;
}

QueryScoring score_query(const Query& query, const IndexView& index) {
  QueryScoring s;
  s.terms = distinct_terms(query);
  const Bm25Params& params = index.meta.bm25;
  std::vector<float> factors;
  double factor_sum = 0;
  for (const QueryTerm& term : s.terms) {
    factors.push_back(bm25_query_factor(term.count, params.k3));
    factor_sum += factors.back();
  }
  s.units_per_score = bm25_units_per_score(factor_sum, index.meta.stats.doc_count, params);
  s.score_of_unit = 1.0f / s.units_per_score;
  s.infos.resize(s.terms.size(), nullptr);
  s.scoring.resize(s.terms.size());
  for (size_t i = 0; i < s.terms.size(); ++i) {
    const TermInfo* info = index.find(s.terms[i].text);
    s.infos[i] = info;
    if (info == nullptr) continue;
    const float idf = bm25_idf(info->df, index.meta.stats.doc_count);
    s.scoring[i] = {bm25_unit_weight(idf, params, factors[i], s.units_per_score), factors[i] * s.units_per_score};
  }
  return s;
}

void units_to_scores(std::vector<Hit>& hits, const QueryScoring& scoring) {
  for (Hit& hit : hits) hit.score *= scoring.score_of_unit;
}

}  // namespace warp
