// libFuzzer: any bytes as a field's text, its first bytes also choosing the query terms and phrases,
// the length and the bytes scanned, through the snippet builder: the snippet is valid UTF-8, never longer than
// the length allows (the field's characters, each escaped at most as "&quot;", the tags and two
// marks), and holds only the caller's tags as markup.
#include <cstdlib>
#include <string>

#include "common/analysis/analyzer.hpp"
#include "common/util/utf8.hpp"
#include "leaf/fetch/snippet.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static warp::Analyzer analyzer;
  if (size < 3) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 3, size - 3);
  warp::SnippetOptions options{static_cast<size_t>(1 + data[0] % 200), "<em>", "</em>"};
  if (data[1] & 1) options.max_scan_bytes = 1 + data[1];
  // Query terms: the analyzed words of a slice of the text.
  warp::SnippetTerms terms;
  const size_t from = data[2] % (text.size() + 1);
  for (const std::string& term : analyzer.analyze(text.substr(from, 40))) terms[term] = 1.0 + term.size() % 3;
  // Phrases: the analyzed words of two slices, so that some stand in the text.
  if (data[1] & 2) {
    for (const size_t at : {from, size_t{data[0]} % (text.size() + 1)}) {
      std::vector<std::string> words = analyzer.analyze(text.substr(at, 1 + data[1] % 24));
      if (words.size() >= 2) options.phrases.push_back(std::move(words));
    }
  }
  const std::string snippet = warp::build_snippet(text, terms, analyzer, options);
  if (!warp::utf8_valid(snippet)) std::abort();
  size_t characters = 0, tags = 0;
  for (size_t pos = 0; pos < snippet.size(); ++characters) warp::utf8_next(snippet, pos);
  for (size_t at = snippet.find("<em>"); at != std::string::npos; at = snippet.find("<em>", at + 1)) ++tags;
  if (characters > options.length * 6 + tags * 9 + 2) std::abort();
  // Markup: only the tags ("<" of the field is escaped).
  size_t markup = 0;
  for (size_t at = snippet.find('<'); at != std::string::npos; at = snippet.find('<', at + 1)) ++markup;
  if (markup != 2 * tags) std::abort();
  return 0;
}
