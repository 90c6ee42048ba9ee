// The query syntax of the search box (docs/api.md "Query syntax"): bare words, +required and
// -excluded words, "phrases" and field:term. Parsed here into clauses, then analyzed into a Query
// whose bare and required words are scored as before and whose required and excluded words are
// constraints the query processors apply while they rank (query.hpp). A query of bare words alone
// gives the Query that analyzing its text gives: the same terms, scores and ranking.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/query/query.hpp"
#include "common/util/status.hpp"

namespace warp {

class Analyzer;

// A query the syntax cannot take: the message names the column (1-based, in bytes) and what to do.
class QuerySyntaxError : public Error {
 public:
  QuerySyntaxError(size_t column, const std::string& what);
  size_t column() const { return column_; }

 private:
  size_t column_;
};

enum class Occur : uint8_t { kShould, kMust, kMustNot };

struct QueryClause {
  Occur occur = Occur::kShould;
  std::string text;   // backslash escapes resolved
  std::string field;  // field:…; empty: the document's text
  bool phrase = false;
  size_t column = 1;  // where the clause begins (its operator)
};

// The clauses of `q`, in order. Whitespace separates them. At a clause's start, `+` requires and
// `-` excludes what follows (a lone `+` or `-` is punctuation, as it was); `name:` before a word
// or a quote names a field; `"…"` is a phrase; a backslash takes the next character literally.
// Throws QuerySyntaxError on an unclosed quote, an operator before an operator, or an empty field.
std::vector<QueryClause> parse_query_syntax(std::string_view q);

// `q` parsed and analyzed: bare and required words and phrases' words are the scored terms
// (analyze_query over their text, as a plain query is: the same stop-word rule), required words
// must all be in a document, and a document holding every word of an excluded clause is kept out.
// A phrase of two words or more (analyzed with its stop words: "to be or not to be") must stand in
// a document as written, one word after another (Query::phrases), or, excluded, must not; a phrase
// of one word is that word, required (or excluded). Throws QuerySyntaxError for fields (no field
// index is kept yet) and for a query with nothing but excluded words.
Query analyze_query_syntax(std::string_view q, Analyzer& analyzer, QueryMode mode, size_t k);

}  // namespace warp
