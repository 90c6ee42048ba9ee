// Snippets against a brute-force reference on random texts (seed printed): valid UTF-8 always,
// within the length, whole words of the field in order, every shown word that matches a query
// term highlighted and nothing else, and no window of the field scoring more than what is shown.
#include "leaf/fetch/snippet.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "common/util/utf8.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

const SnippetOptions kMark{40, "<mark>", "</mark>"};

std::string unescape(std::string_view html) {
  std::string out;
  for (size_t i = 0; i < html.size();) {
    bool replaced = false;
    for (const auto& [ref, ch] : std::vector<std::pair<std::string_view, char>>{
             {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}}) {
      if (html.substr(i, ref.size()) == ref) {
        out += ch, i += ref.size(), replaced = true;
        break;
      }
    }
    if (!replaced) out += html[i++];
  }
  return out;
}

// The words of `text`: runs of token characters, as the analyzer splits; with `places`, each
// word's first character and the one after its last.
std::vector<std::string> words_of(std::string_view text, std::vector<std::pair<size_t, size_t>>* places = nullptr) {
  std::vector<std::string> words;
  std::string current;
  size_t index = 0, first = 0;
  for (size_t pos = 0; pos < text.size(); ++index) {
    const size_t at = pos;
    const char32_t cp = utf8_next(text, pos);
    if (is_token_char(cp)) {
      if (current.empty()) first = index;
      current.append(text.substr(at, pos - at));
    } else if (!current.empty()) {
      words.push_back(std::move(current));
      current.clear();
      if (places) places->emplace_back(first, index);
    }
  }
  if (!current.empty()) {
    words.push_back(current);
    if (places) places->emplace_back(first, index);
  }
  return words;
}

size_t characters(std::string_view text) {
  size_t n = 0;
  for (size_t pos = 0; pos < text.size(); ++n) utf8_next(text, pos);
  return n;
}

// The analyzed term of a word, or "" where it has none among `terms`.
std::string term_of(Analyzer& analyzer, const std::string& word, const SnippetTerms& terms) {
  const std::vector<std::string> analyzed = analyzer.analyze(word);
  return analyzed.size() == 1 && terms.count(analyzed[0]) ? analyzed[0] : "";
}

// Distinct terms' weights once, a tenth for each repeat: the snippet's own measure.
double score_of(Analyzer& analyzer, const std::vector<std::string>& words, const SnippetTerms& terms) {
  std::map<std::string, int> seen;
  double score = 0;
  for (const std::string& word : words) {
    const std::string term = term_of(analyzer, word, terms);
    if (!term.empty()) score += seen[term]++ == 0 ? terms.at(term) : terms.at(term) / 10;
  }
  return score;
}

TEST(Snippet, ThePassageHoldingMoreOfTheQueryWinsAndItsWordsAreHighlighted) {
  Analyzer analyzer;
  const std::string text =
      "Wings appear first here, alone. Then a long stretch of unrelated filler text follows for a while "
      "and more of it again. Finally the wing and its lift are discussed together in this sentence.";
  const std::string snippet = build_snippet(text, {{"wing", 1.0}, {"lift", 1.0}}, analyzer, {60, "<em>", "</em>"});
  EXPECT_NE(snippet.find("<em>wing</em> and its <em>lift</em>"), std::string::npos) << snippet;
  EXPECT_EQ(snippet.rfind("…", 0), 0u) << "cut before: " << snippet;
  // No query term in the field: its beginning, cut at a word.
  EXPECT_EQ(build_snippet(text, {{"drag", 1.0}}, analyzer, {20, "<em>", "</em>"}), "Wings appear first…");
  EXPECT_EQ(build_snippet("", {{"wing", 1.0}}, analyzer, {}), "");
}

TEST(Snippet, TextIsEscapedTagsAreTheCallersAndWhiteSpaceCollapses) {
  Analyzer analyzer;
  const std::string snippet = build_snippet("a <script>alert('x')</script> & \"wing\"\n\n\tends", {{"wing", 2.0}},
                                            analyzer, {200, "<b class=\"hit\">", "</b>"});
  EXPECT_EQ(snippet,
            "a &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;<b class=\"hit\">wing</b>&quot; ends");
}

TEST(Snippet, InvalidUtf8AndCutsInsideCharactersGiveValidUtf8) {
  Analyzer analyzer;
  const std::string text = "caf\xc3\xa9 \xff\xfe wing \xe6\x9d\xb1\xe4\xba\xac wing";
  for (size_t length = 1; length < 30; ++length) {
    SnippetOptions options{length, "<em>", "</em>"};
    options.max_scan_bytes = length;  // cuts inside multi-byte characters too
    const std::string snippet = build_snippet(text, {{"wing", 1.0}}, analyzer, options);
    EXPECT_TRUE(utf8_valid(snippet)) << length;
  }
}

TEST(Snippet, RandomTextsAgreeWithTheReference) {
  std::mt19937_64 rng(testing::test_seed());
  Analyzer analyzer;
  const std::vector<std::string> vocabulary = {"wing", "wings", "Lift", "drag",  "the",    "über",  "東京",    "flow",
                                               "x1",   "a",     "mach", "shock", "layers", "naïve", "boundary"};
  const std::vector<std::string> gaps = {" ", "  ", "\n", ", ", ". ", " - ", " <", "& ", "\"", "\xff"};
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const size_t n = rng() % 80;
    for (size_t w = 0; w < n; ++w) text += vocabulary[rng() % vocabulary.size()] + gaps[rng() % gaps.size()];
    SnippetTerms terms;
    for (const char* word : {"wing", "lift", "drag", "über", "shock", "layer"})
      if (rng() % 2) terms[analyzer.analyze(word).front()] = 0.5 + static_cast<double>(rng() % 100) / 10;
    const SnippetOptions options{12 + rng() % 120, "<mark>", "</mark>"};  // longer than any word
    const std::string snippet = build_snippet(text, terms, analyzer, options);
    SCOPED_TRACE("text: " + text + "\nsnippet: " + snippet + "\nlength " + std::to_string(options.length));
    ASSERT_TRUE(utf8_valid(snippet));

    // What is shown, without tags and marks; the highlighted words.
    std::string shown;
    std::vector<std::string> marked;
    for (size_t i = 0; i < snippet.size();) {
      if (snippet.compare(i, 6, "<mark>") == 0) {
        const size_t end = snippet.find("</mark>", i);
        ASSERT_NE(end, std::string::npos);
        marked.push_back(unescape(snippet.substr(i + 6, end - i - 6)));
        shown += marked.back();
        i = end + 7;
      } else {
        shown += snippet[i++];
      }
    }
    shown = unescape(shown);
    const bool cut_before = shown.rfind("…", 0) == 0;
    if (cut_before) shown.erase(0, std::string("…").size());
    if (shown.size() >= 3 && shown.compare(shown.size() - 3, 3, "…") == 0) shown.resize(shown.size() - 3);
    if (text.empty() || words_of(text).empty()) continue;
    EXPECT_LE(characters(shown), options.length);

    // Whole words of the field, in order: the shown words are a run of the field's words.
    std::vector<std::pair<size_t, size_t>> places;
    const std::vector<std::string> all = words_of(utf8_sanitize(text), &places), seen = words_of(shown);
    bool is_run = seen.empty();
    for (size_t start = 0; !is_run && start + seen.size() <= all.size(); ++start)
      is_run = std::equal(seen.begin(), seen.end(), all.begin() + static_cast<std::ptrdiff_t>(start));
    EXPECT_TRUE(is_run);
    // Every shown word matching a term is highlighted, and only those.
    std::vector<std::string> matching;
    for (const std::string& word : seen)
      if (!term_of(analyzer, word, terms).empty()) matching.push_back(word);
    EXPECT_EQ(marked, matching);
    // No window of whole words within the length (of the field's characters) scores more than
    // what is shown.
    double best = 0;
    for (size_t from = 0; from < all.size(); ++from) {
      std::vector<std::string> window;
      for (size_t to = from; to < all.size() && places[to].second - places[from].first <= options.length; ++to)
        window.push_back(all[to]);
      best = std::max(best, score_of(analyzer, window, terms));
    }
    EXPECT_GE(score_of(analyzer, seen, terms) + 1e-9, best);
  }
}

TEST(Snippet, PhrasesAreHighlightedAsOneAndTheirPassageWins) {
  Analyzer analyzer;
  SnippetOptions options{60, "<b>", "</b>"};
  options.phrases = {{"shock", "wave"}, {"of", "the", "wing"}};
  const SnippetTerms terms = {{"shock", 1.0}, {"wave", 1.0}, {"wing", 3.0}};
  // Words of the phrase apart score less than the phrase together, even where a heavier word is.
  const std::string text =
      "A wave came before the shock, and then the wing stalled in a long turn over the sea; much later "
      "the Shock-Waves formed at the root of the wing, which is the point.";
  const std::string shown = build_snippet(text, terms, analyzer, options);
  EXPECT_NE(shown.find("<b>Shock-Waves</b>"), std::string::npos) << shown;
  EXPECT_NE(shown.find("<b>of the wing</b>"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("<b>wave</b>"), std::string::npos) << shown;
  // A phrase cut by the snippet's end is not wrapped in part; its words still are, one by one.
  options.length = 12;
  options.phrases = {{"shock", "wave", "format"}};
  EXPECT_EQ(build_snippet("shock   wave formation", terms, analyzer, options), "<b>shock</b> <b>wave</b>…");
  options.length = 60;
  EXPECT_EQ(build_snippet("shock   wave formation", terms, analyzer, options), "<b>shock wave formation</b>");
  // Overlapping occurrences: the first one wins, the rest are words.
  options.phrases = {{"wave", "wave"}};
  EXPECT_EQ(build_snippet("wave wave wave", terms, analyzer, options), "<b>wave wave</b> <b>wave</b>");
}

}  // namespace
}  // namespace warp
