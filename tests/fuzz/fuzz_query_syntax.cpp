// libFuzzer: any bytes as a query in the query syntax. Either a QuerySyntaxError whose column lies
// within the query, or clauses that, written back with every special character escaped, parse to
// the same clauses; and their analysis: required terms among the scored ones, excluded groups
// sorted, distinct and non-empty, phrases of two terms or more, sorted and distinct, every term
// valid UTF-8.
#include <algorithm>
#include <cstdlib>

#include "common/analysis/analyzer.hpp"
#include "common/query/query_syntax.hpp"
#include "common/util/utf8.hpp"

namespace {

std::string escaped(const std::string& text, bool phrase) {
  std::string out;
  for (char c : text) {
    const bool special = c == '"' || c == '\\' ||
                         (!phrase && (c == ':' || c == '+' || c == '-' || c == ' ' || c == '\t' || c == '\n' ||
                                      c == '\r' || c == '\f' || c == '\v'));
    if (special) out += '\\';
    out += c;
  }
  return out;
}

std::string written(const std::vector<warp::QueryClause>& clauses) {
  std::string q;
  for (const warp::QueryClause& c : clauses) {
    q += c.occur == warp::Occur::kMust ? "+" : c.occur == warp::Occur::kMustNot ? "-" : "";
    if (!c.field.empty()) q += c.field + ":";
    q += c.phrase ? "\"" + escaped(c.text, true) + "\"" : escaped(c.text, false);
    q += ' ';
  }
  return q;
}

bool same(const std::vector<warp::QueryClause>& a, const std::vector<warp::QueryClause>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].occur != b[i].occur || a[i].text != b[i].text || a[i].field != b[i].field || a[i].phrase != b[i].phrase)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static warp::Analyzer analyzer;
  const std::string_view q(reinterpret_cast<const char*>(data), size);
  std::vector<warp::QueryClause> clauses;
  try {
    clauses = warp::parse_query_syntax(q);
  } catch (const warp::QuerySyntaxError& e) {
    if (e.column() < 1 || e.column() > size + 1) std::abort();
    return 0;
  }
  if (!same(clauses, warp::parse_query_syntax(written(clauses)))) std::abort();
  try {
    const warp::Query query = warp::analyze_query_syntax(q, analyzer, warp::QueryMode::kOr, 10);
    for (const std::string& term : query.terms)
      if (term.empty() || !warp::utf8_valid(term)) std::abort();
    for (const std::string& term : query.required)
      if (std::find(query.terms.begin(), query.terms.end(), term) == query.terms.end()) std::abort();
    for (size_t g = 0; g < query.excluded.size(); ++g) {
      const std::vector<std::string>& group = query.excluded[g];
      if (group.empty() || !std::is_sorted(group.begin(), group.end()) ||
          std::adjacent_find(group.begin(), group.end()) != group.end() || (g > 0 && !(query.excluded[g - 1] < group)))
        std::abort();
      for (const std::string& term : group)
        if (term.empty() || !warp::utf8_valid(term)) std::abort();
    }
    for (const auto* phrases : {&query.phrases, &query.excluded_phrases}) {
      if (!std::is_sorted(phrases->begin(), phrases->end()) ||
          std::adjacent_find(phrases->begin(), phrases->end()) != phrases->end())
        std::abort();
      for (const std::vector<std::string>& phrase : *phrases) {
        if (phrase.size() < 2) std::abort();
        for (const std::string& term : phrase)
          if (term.empty() || !warp::utf8_valid(term)) std::abort();
      }
    }
  } catch (const warp::QuerySyntaxError& e) {
    if (e.column() < 1 || e.column() > size + 1) std::abort();
  }
  return 0;
}
