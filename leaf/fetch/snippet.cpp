#include "leaf/fetch/snippet.hpp"

#include <algorithm>
#include <vector>

#include "common/util/utf8.hpp"

namespace warp {
namespace {

// A word of the field: its bytes and characters, and the query term it matches (-1: none).
struct Word {
  size_t begin = 0, end = 0;   // bytes of the sanitized text
  size_t first = 0, last = 0;  // characters: [first, last)
  int term = -1;
  int phrase = -1;  // a query phrase begins here (and ends at word phrase_end, exclusive)
  size_t phrase_end = 0;
};

bool is_space(char32_t cp) { return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f' || cp == '\v'; }

// The score of the window of words [from, to): each distinct term's weight once, a tenth of it for
// each repeat (density), so a passage holding more of the query beats one repeating a word.
// A phrase counts as one more term (numbered after the terms), weighing as its words together.
double window_score(const std::vector<Word>& words, size_t from, size_t to, const std::vector<double>& weights,
                    std::vector<int>& seen) {
  double score = 0;
  const auto count = [&](int term) {
    score += seen[static_cast<size_t>(term)]++ == 0 ? weights[static_cast<size_t>(term)]
                                                    : weights[static_cast<size_t>(term)] / 10;
  };
  for (size_t w = from; w < to; ++w) {
    if (words[w].term >= 0) count(words[w].term);
    if (words[w].phrase >= 0 && words[w].phrase_end <= to) count(words[w].phrase);
  }
  for (size_t w = from; w < to; ++w) {
    if (words[w].term >= 0) seen[static_cast<size_t>(words[w].term)] = 0;
    if (words[w].phrase >= 0) seen[static_cast<size_t>(words[w].phrase)] = 0;
  }
  return score;
}

// Marks where the phrases stand in the words (`stems`: each word as the analyzer indexes it, empty
// where it is not indexed), the longest first where two begin at one word, none overlapping; each
// phrase numbered after the terms and weighing its words' weights together.
void find_phrases(std::vector<Word>& words, const std::vector<std::string>& stems,
                  const std::vector<std::vector<std::string>>& phrases,
                  const std::unordered_map<std::string_view, int>& number, std::vector<double>& weights) {
  const size_t first_phrase = weights.size();
  for (const std::vector<std::string>& phrase : phrases) {
    double weight = 0;
    for (const std::string& word : phrase)
      if (auto it = number.find(word); it != number.end()) weight += weights[static_cast<size_t>(it->second)];
    weights.push_back(weight > 0 ? weight : 1);
  }
  for (size_t w = 0; w < words.size();) {
    size_t best = 0;
    for (size_t p = 0; p < phrases.size(); ++p) {
      const std::vector<std::string>& phrase = phrases[p];
      if (phrase.size() < 2 || phrase.size() <= best || w + phrase.size() > words.size()) continue;
      if (std::equal(phrase.begin(), phrase.end(), stems.begin() + static_cast<std::ptrdiff_t>(w))) {
        best = phrase.size();
        words[w].phrase = static_cast<int>(first_phrase + p);
        words[w].phrase_end = w + phrase.size();
      }
    }
    w += best > 0 ? best : 1;
  }
}

}  // namespace

void append_html_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

std::string build_snippet(std::string_view field, const SnippetTerms& terms, Analyzer& analyzer,
                          const SnippetOptions& options) {
  if (field.empty() || options.length == 0) return {};
  // The scanned part, cut before a code point that the cut would split.
  size_t scan = std::min(field.size(), options.max_scan_bytes);
  while (scan < field.size() && scan > 0 && (static_cast<unsigned char>(field[scan]) & 0xC0) == 0x80) --scan;
  const bool cut_at_scan = scan < field.size();
  const std::string text = utf8_sanitize(field.substr(0, scan));

  // Terms by number, and the words of the text with the characters' byte offsets.
  std::vector<std::string_view> names;
  std::vector<double> weights;
  std::unordered_map<std::string_view, int> number;
  for (const auto& [term, weight] : terms) {
    number.emplace(term, static_cast<int>(names.size()));
    names.push_back(term);
    weights.push_back(weight);
  }
  std::vector<size_t> offsets;  // by character: its first byte; one more: the text's end
  std::vector<Word> words;
  std::vector<std::string> analyzed;
  bool in_word = false;
  for (size_t pos = 0; pos < text.size();) {
    const size_t at = pos;
    const char32_t cp = utf8_next(text, pos);
    const size_t index = offsets.size();
    offsets.push_back(at);
    if (is_token_char(cp)) {
      if (!in_word) words.push_back({at, 0, index, 0, -1});
      in_word = true;
      words.back().end = pos, words.back().last = index + 1;
    } else {
      in_word = false;
    }
  }
  offsets.push_back(text.size());
  const size_t characters = offsets.size() - 1;
  if (!terms.empty() || !options.phrases.empty()) {
    std::vector<std::string> stems(words.size());
    for (size_t w = 0; w < words.size(); ++w) {
      Word& word = words[w];
      analyzed.clear();
      analyzer.analyze(std::string_view(text).substr(word.begin, word.end - word.begin), analyzed);
      if (analyzed.size() != 1) continue;  // over the length cap (or a stop word where they go): never indexed
      stems[w] = std::move(analyzed.front());
      auto it = number.find(stems[w]);
      if (it != number.end()) word.term = it->second;
    }
    if (!options.phrases.empty()) find_phrases(words, stems, options.phrases, number, weights);
  }

  // The best window: it starts at a word and holds the words that end within `length` characters.
  const size_t length = options.length;
  size_t best_from = 0, best_to = 0;
  double best = 0;
  std::vector<int> seen(weights.size(), 0);
  for (size_t from = 0, to = 0; from < words.size(); ++from) {
    if (words[from].term < 0 && words[from].phrase < 0) continue;  // a window worth showing starts at a match
    to = std::max(to, from);
    while (to < words.size() && words[to].last - words[from].first <= length) ++to;
    const double score = window_score(words, from, to, weights, seen);
    if (score > best) best = score, best_from = from, best_to = to;
  }
  // Characters shown: the window's words, and context before them where they leave room (a third
  // of what is left, so the match sits early in the snippet); else the field's beginning.
  size_t first = 0, last = std::min(characters, length);
  if (best > 0) {
    const size_t span = words[best_to - 1].last - words[best_from].first;
    const size_t room = length > span ? length - span : 0;
    first = words[best_from].first - std::min(words[best_from].first, room / 3);
    last = std::min(characters, first + length);
    // Room left at the end (the field ends): more context before.
    if (last - first < length) first -= std::min(first, length - (last - first));
  }
  // Cut at word boundaries: no word shown in part.
  auto word_at = [&](size_t character) {  // the word holding this character, or words.end()
    auto it =
        std::upper_bound(words.begin(), words.end(), character, [](size_t c, const Word& w) { return c < w.first; });
    if (it == words.begin()) return words.end();
    --it;
    return character < it->last ? it : words.end();
  };
  if (first > 0) {
    // Starting inside a word: the whole word where the best window still fits after it, else after it.
    auto w = word_at(first);
    if (w != words.end() && w->first < first) {
      const bool fits = best <= 0 || words[best_to - 1].last <= w->first + length;
      first = fits ? w->first : w->last;
      last = std::min(characters, first + length);
    }
  }
  if (last < characters) {
    auto w = word_at(last);
    if (w != words.end() && w->first < last) last = w->first;  // ends inside a word: before it
  }
  if (last <= first) {  // one word longer than the snippet: shown cut, at characters
    first = best > 0 ? words[best_from].first : 0;
    last = std::min(characters, first + length);
  }

  std::string out;
  out.reserve((last - first) * 2);
  if (first > 0) out += "…";
  auto word = std::lower_bound(words.begin(), words.end(), first, [](const Word& w, size_t c) { return w.last <= c; });
  bool space = false;
  // The characters [from, to) as shown: escaped, runs of white space as one space.
  const auto show = [&](size_t from, size_t to) {
    for (size_t c = from; c < to; ++c) {
      const std::string_view ch = std::string_view(text).substr(offsets[c], offsets[c + 1] - offsets[c]);
      size_t pos = 0;
      if (is_space(utf8_next(ch, pos))) {
        space = c > first;
      } else {
        if (space) out += ' ', space = false;
        append_html_escaped(out, ch);
      }
    }
  };
  for (size_t c = first; c < last;) {
    if (word != words.end() && word->first == c && word->phrase >= 0 && words[word->phrase_end - 1].last <= last) {
      if (space) out += ' ', space = false;
      out += options.pre_tag;
      const size_t end = words[word->phrase_end - 1].last;
      show(c, end);
      out += options.post_tag;
      c = end;
      word = words.begin() + static_cast<std::ptrdiff_t>(word->phrase_end);
      continue;
    }
    if (word != words.end() && word->first == c && word->term >= 0 && word->last <= last) {
      if (space) out += ' ', space = false;
      out += options.pre_tag;
      append_html_escaped(out, std::string_view(text).substr(word->begin, word->end - word->begin));
      out += options.post_tag;
      c = word->last;
      ++word;
      continue;
    }
    show(c, c + 1);  // runs of white space as one space; none leading
    if (word != words.end() && c + 1 >= word->last) ++word;
    ++c;
  }
  if (last < characters || cut_at_scan) out += "…";
  return out;
}

}  // namespace warp
