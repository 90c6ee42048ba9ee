// libFuzzer: any bytes as query text through the analyzer (documents' and queries' analysis), the
// query's distinct terms and the BM25 score units of the query: every term non-empty valid UTF-8,
// counts adding up to the tokens, units a power of two.
#include <cmath>
#include <cstdlib>

#include "common/analysis/analyzer.hpp"
#include "common/util/utf8.hpp"
#include "common/index/bm25.hpp"
#include "common/query/query.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static warp::Analyzer analyzer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> tokens = analyzer.analyze_query(text);
  (void)analyzer.analyze(text);
  for (const std::string& term : tokens) {
    if (term.empty() || !warp::utf8_valid(term)) std::abort();
  }
  const std::vector<warp::QueryTerm> terms = warp::distinct_terms(warp::Query(tokens, warp::QueryMode::kOr, 10));
  uint64_t total = 0;
  double factors = 0;
  for (const warp::QueryTerm& term : terms) {
    total += term.count;
    factors += warp::bm25_query_factor(term.count, warp::Bm25Params{}.k3);
  }
  if (total != tokens.size()) std::abort();
  const float units = warp::bm25_units_per_score(factors, 1000000, warp::Bm25Params{});
  int exponent = 0;
  if (!(units > 0) || std::frexp(units, &exponent) != 0.5f) std::abort();
  return 0;
}
