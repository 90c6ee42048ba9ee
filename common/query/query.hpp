// A query as every service sees it: analyzed terms with their counts, a mode and k. Shared by the
// broker (which analyzes and normalizes it) and the leaves' query processors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warp {

struct FilterNode;  // filter.hpp

enum class QueryMode { kAnd, kOr, kAndOr };
QueryMode parse_query_mode(std::string_view text);  // "and" | "or" | "andor", any case; throws Error
std::string_view to_string(QueryMode mode);

struct Query {
  Query() = default;
  Query(std::vector<std::string> terms, QueryMode mode, size_t k, std::vector<uint32_t> counts = {})
      : terms(std::move(terms)), mode(mode), k(k), counts(std::move(counts)) {}
  // Analyzed terms. A term's query-term frequency is the sum of its counts (1 each where `counts`
  // is empty), so the analyzer's tokens can be passed as they are, repeats included.
  std::vector<std::string> terms;
  QueryMode mode = QueryMode::kOr;
  size_t k = 10;
  std::vector<uint32_t> counts;  // empty, or one per term
  // Constraints of the query syntax (query_syntax.hpp), analyzed; neither changes a score. A
  // document is answered only when it holds every term of `required` (each also a scored term) and
  // not every term of any group of `excluded`.
  std::vector<std::string> required;
  std::vector<std::vector<std::string>> excluded;
  // Phrases of the query syntax, analyzed with their stop words, two terms or more each, in order:
  // a document is answered only when it holds each of `phrases` as consecutive words (their words
  // are in `required` where they are scored) and none of `excluded_phrases`. Needs word positions.
  std::vector<std::vector<std::string>> phrases, excluded_phrases;
  // The request's filter over the index's columns (filter.hpp); null: none. Shared: the copies a
  // query makes on its way (per partition, per segment) read one.
  std::shared_ptr<const FilterNode> filter;
  bool constrained() const { return !required.empty() || !excluded.empty() || has_phrases() || filter != nullptr; }
  bool has_phrases() const { return !phrases.empty() || !excluded_phrases.empty(); }
  // A filter and no other constraint.
  bool filtered_alone() const { return filter != nullptr && required.empty() && excluded.empty() && !has_phrases(); }
};

// A distinct term of a query with how often the query holds it.
struct QueryTerm {
  std::string text;
  uint32_t count = 1;
};

// The query's distinct terms in byte order with their counts; throws Error when `counts` does not
// match `terms` or a count is 0.
std::vector<QueryTerm> distinct_terms(const Query& query);

}  // namespace warp
