#include "common/query/query.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "common/util/status.hpp"

namespace warp {

QueryMode parse_query_mode(std::string_view text) {
  std::string lower(text);  // "AND", "Or": the case is not the mode's
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "and") return QueryMode::kAnd;
  if (lower == "or") return QueryMode::kOr;
  if (lower == "andor") return QueryMode::kAndOr;
  throw Error("unknown query mode '" + std::string(text) + "' (use and, or or andor)");
}

std::string_view to_string(QueryMode mode) {
  switch (mode) {
    case QueryMode::kAnd:
      return "and";
    case QueryMode::kOr:
      return "or";
    case QueryMode::kAndOr:
      return "andor";
  }
  return "?";
}

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

}  // namespace warp
