// Snippets: the best passage of a document's field for a query, its matched words highlighted, as
// HTML. The field is tokenized as the analyzer tokenizes (so a word matches exactly when the index
// would have matched it: "Wings" for the term "wing"), each window of `length` characters is scored
// by the weights of the distinct query terms it holds (a repeat adds a tenth of its weight), and
// the best window, earliest on ties, is cut at word boundaries. The text is HTML-escaped, matched
// words wrapped in the tags given (inserted as they are: they are the caller's markup), runs of
// white space shown as one space, and "…" marks a cut. Invalid UTF-8 in the field becomes U+FFFD:
// the snippet is valid UTF-8 whatever the input.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/analysis/analyzer.hpp"

namespace warp {

struct SnippetOptions {
  size_t length = 160;  // characters (code points) of the field's text shown, tags and marks not counted
  std::string pre_tag = "<em>", post_tag = "</em>";
  // Only the field's first bytes are looked at (a web page's body can be megabytes; Elasticsearch
  // bounds its highlighter the same way).
  size_t max_scan_bytes = size_t{1} << 18;
  // The query's phrases (analyzed, in order): where the field holds one, its words are wrapped in
  // one pair of tags ("<em>shock wave</em>") and the passage is scored as holding the phrase.
  std::vector<std::vector<std::string>> phrases;
};

// Analyzed query terms and their weights (e.g. BM25's idf in the partition).
using SnippetTerms = std::unordered_map<std::string, double>;

// The snippet of `text`; the field's beginning where no query term occurs in it; empty for an
// empty field. `analyzer` must be the index's.
std::string build_snippet(std::string_view text, const SnippetTerms& terms, Analyzer& analyzer,
                          const SnippetOptions& options);

// `text` with & < > " ' written as HTML character references.
void append_html_escaped(std::string& out, std::string_view text);

}  // namespace warp
