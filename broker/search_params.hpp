// A search's parameters as the client sends them (GET's query string or POST's JSON body), read
// and checked before analysis: an unknown parameter or a value out of range is a 400 with its
// reason, never ignored (a misspelt `offest` would otherwise return the first page as if it were
// the one asked for; Elasticsearch refuses them the same way). docs/api.md lists them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/http/http_server.hpp"

namespace warp {

struct SearchParams {
  std::string q;
  std::string mode = "or";
  bool syntax = true;  // q in the query syntax (query_syntax.hpp); syntax=plain: q is words only
  size_t k = 10;
  size_t offset = 0;   // hits of the ranking skipped: a page past the first
  uint64_t after = 0;  // read-your-writes: answered once every partition serves the writes up to here
  // The fetch phase (after the merge, for the page's hits only): each hit's stored document, and a
  // snippet of one of its fields with the query's words highlighted.
  bool source = false;
  std::string snippet;  // the field; empty: no snippets
  size_t snippet_length = 160;
  std::string highlight_pre = "<em>", highlight_post = "</em>";
  bool fetches() const { return source || !snippet.empty(); }
  // Filters over the index's columns (common/query/filter.hpp), joined with AND; facets to count
  // over the matching documents, each with its facet_size most frequent values.
  std::vector<std::string> filters;
  std::vector<std::string> facets;          // "*": every column of the index (read_filters_and_facets expands it)
  std::vector<std::string> numeric_facets;  // those of `facets` that are numeric columns
  size_t facet_size = 10;
};

inline constexpr size_t kMaxFilters = 16, kMaxFilterBytes = 4096, kMaxFacets = 16, kMaxFacetSize = 1000;

inline constexpr size_t kMaxSnippetLength = 2000, kMaxHighlightTagBytes = 64;

// Fills `params`; the 400 to answer where the request is not a valid search.
std::optional<http::Response> read_search_params(const http::Request& request, size_t max_k, SearchParams& params);

// {"error": message} with `status`; invalid UTF-8 in the message becomes U+FFFD.
http::Response json_error(int status, const std::string& message);

}  // namespace warp
