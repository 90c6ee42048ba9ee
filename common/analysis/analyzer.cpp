#include "common/analysis/analyzer.hpp"

#include <libstemmer.h>

#include <algorithm>
#include <array>
#include <bit>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/util/utf8.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

constexpr std::string_view kAnalyzerFamily = "warp-analyzer/1";
constexpr std::string_view kFolding = "fold=latin-greek-cyrillic";

// Snowball's English stop-word list (snowballstem.org/algorithms/english/stop.txt), sorted.
constexpr std::array<std::string_view, 174> kEnglishStopwords = {
    "a",       "about",     "above",     "after",      "again",   "against", "all",     "am",      "an",
    "and",     "any",       "are",       "aren't",     "as",      "at",      "be",      "because", "been",
    "before",  "being",     "below",     "between",    "both",    "but",     "by",      "can't",   "cannot",
    "could",   "couldn't",  "did",       "didn't",     "do",      "does",    "doesn't", "doing",   "don't",
    "down",    "during",    "each",      "few",        "for",     "from",    "further", "had",     "hadn't",
    "has",     "hasn't",    "have",      "haven't",    "having",  "he",      "he'd",    "he'll",   "he's",
    "her",     "here",      "here's",    "hers",       "herself", "him",     "himself", "his",     "how",
    "how's",   "i",         "i'd",       "i'll",       "i'm",     "i've",    "if",      "in",      "into",
    "is",      "isn't",     "it",        "it's",       "its",     "itself",  "let's",   "me",      "more",
    "most",    "mustn't",   "my",        "myself",     "no",      "nor",     "not",     "of",      "off",
    "on",      "once",      "only",      "or",         "other",   "ought",   "our",     "ours",    "ourselves",
    "out",     "over",      "own",       "same",       "shan't",  "she",     "she'd",   "she'll",  "she's",
    "should",  "shouldn't", "so",        "some",       "such",    "than",    "that",    "that's",  "the",
    "their",   "theirs",    "them",      "themselves", "then",    "there",   "there's", "these",   "they",
    "they'd",  "they'll",   "they're",   "they've",    "this",    "those",   "through", "to",      "too",
    "under",   "until",     "up",        "very",       "was",     "wasn't",  "we",      "we'd",    "we'll",
    "we're",   "we've",     "were",      "weren't",    "what",    "what's",  "when",    "when's",  "where",
    "where's", "which",     "while",     "who",        "who's",   "whom",    "why",     "why's",   "with",
    "won't",   "would",     "wouldn't",  "you",        "you'd",   "you'll",  "you're",  "you've",  "your",
    "yours",   "yourself",  "yourselves"};

}  // namespace

bool is_english_stopword(std::string_view folded_token) {
  return std::binary_search(kEnglishStopwords.begin(), kEnglishStopwords.end(), folded_token);
}

bool is_token_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  }
  if (cp < 0x100) {  // Latin-1: letters, plus ª µ º
    if (cp == 0xAA || cp == 0xB5 || cp == 0xBA) return true;
    return cp >= 0xC0 && cp != 0xD7 && cp != 0xF7;
  }
  // Punctuation, symbols and specials above Latin-1; everything else (letters and marks of
  // all scripts, CJK ideographs) is part of a token.
  if (cp >= 0x2000 && cp <= 0x2BFF) return false;  // general punctuation … misc symbols/arrows
  if (cp >= 0x3000 && cp <= 0x303F) return false;  // CJK symbols and punctuation
  if (cp >= 0xD800 && cp <= 0xF8FF) return false;  // surrogates, private use
  if (cp >= 0xFE10 && cp <= 0xFE6F) return false;  // vertical forms, CJK compat, small forms
  if (cp >= 0xFF00 && cp <= 0xFF0F) return false;  // fullwidth punctuation
  if (cp >= 0xFF1A && cp <= 0xFF20) return false;
  if (cp >= 0xFFF0) return cp > 0xFFFF && !(cp >= 0x1F000 && cp <= 0x1FAFF);  // specials, emoji
  if (cp == 0x037E || cp == 0x0387) return false;                             // Greek question mark, ano teleia
  return true;
}

char32_t case_fold(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp < 0x100) return (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) ? cp + 32 : cp;
  if (cp <= 0x17F) {                                           // Latin Extended-A
    if (cp == 0x130) return 'i';                               // İ
    if (cp == 0x131 || cp == 0x138 || cp == 0x149) return cp;  // ı ĸ ŉ have no upper pair here
    if (cp == 0x178) return 0xFF;                              // Ÿ → ÿ
    if (cp == 0x17F) return 's';                               // long s
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp & 1) ? cp + 1 : cp;
    return (cp & 1) ? cp : cp + 1;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;  // Greek capitals
  if (cp == 0x3C2) return 0x3C3;                                  // final sigma
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 63;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;  // Cyrillic capitals
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

std::string AnalyzerConfig::version() const {
  std::string v(kAnalyzerFamily);
  v += ' ';
  v += kFolding;
  v += stem ? " stem=porter2" : " stem=none";
  v += remove_stopwords ? " stop=english" : " stop=none";
  v += " max=" + std::to_string(max_token_bytes);
  return v;
}

AnalyzerConfig AnalyzerConfig::from_version(const std::string& version) {
  for (bool stem : {true, false}) {
    for (bool stop : {false, true}) {
      AnalyzerConfig config;
      config.stem = stem;
      config.remove_stopwords = stop;
      // The token cap is the last field: parse it rather than enumerate.
      auto max_at = version.rfind(" max=");
      if (max_at != std::string::npos) {
        try {
          config.max_token_bytes = std::stoul(version.substr(max_at + 5));
        } catch (...) {
        }
      }
      if (config.version() == version) return config;
    }
  }
  throw Error("unknown analyzer version '" + version + "' (this build knows " + AnalyzerConfig{}.version() +
              " and its stem/stop variants)");
}

Analyzer::Analyzer(AnalyzerConfig config) : config_(std::move(config)) {
  if (config_.stem) {
    stemmer_ = sb_stemmer_new("english", "UTF_8");
    if (stemmer_ == nullptr) throw Error("libstemmer has no 'english' stemmer");
  }
}

Analyzer::~Analyzer() {
  if (stemmer_ != nullptr) sb_stemmer_delete(stemmer_);
}

size_t Analyzer::end_token(size_t start, size_t end) {
  const std::string_view token(folded_.data() + start, end - start);
  if (token.size() <= config_.max_token_bytes &&
      !((config_.remove_stopwords || dropping_stopwords_) && is_english_stopword(token))) {
    spans_.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(token.size()));
    return end;
  }
  return start;
}

std::string_view Analyzer::stemmed(std::string_view token) {
  if (stemmer_ == nullptr) return token;
  const sb_symbol* out =
      sb_stemmer_stem(stemmer_, reinterpret_cast<const sb_symbol*>(token.data()), static_cast<int>(token.size()));
  if (out == nullptr) throw Error("libstemmer ran out of memory");
  return {reinterpret_cast<const char*>(out), static_cast<size_t>(sb_stemmer_length(stemmer_))};
}

uint32_t Analyzer::stem_id(std::string_view token, uint64_t hash) {
  if (shared_ != nullptr) {  // the shared cache first; once it is frozen, the own one
    const uint32_t id = shared_->find(token, hash);
    if (id != SharedStemCache::kMissing) return id;
    if (!shared_frozen_) {
      if (!shared_->frozen()) {
        const uint32_t added = shared_->insert(token, hash, stemmed(token));
        if (added != SharedStemCache::kMissing) return added;
      }
      shared_->wait_until_settled();
      shared_base_ = shared_->stems();  // final now: the own cache's ids go above it
      shared_frozen_ = true;
    }
  }
  const uint32_t id = cache_.find(token, hash);
  if (id != StemCache::kMissing)
    return id < alias_.size() && alias_[id] != StemCache::kMissing ? alias_[id] : shared_base_ + id;
  const std::string_view stem = stemmed(token);
  const uint32_t added = cache_.insert(token, stem);
  if (shared_ == nullptr) return added;
  // A stem the shared cache holds keeps its id there (one stem, one id).
  const uint32_t in_shared = shared_->find_stem(stem);
  if (alias_.size() <= added) alias_.resize(added + 1, StemCache::kMissing);
  alias_[added] = in_shared;
  return in_shared != SharedStemCache::kMissing ? in_shared : shared_base_ + added;
}

namespace {

// ASCII's share of the tokenizer as one table: 0 for a separator, else the folded byte.
constexpr std::array<char, 128> kAsciiFold = [] {
  std::array<char, 128> fold{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) fold[c] = static_cast<char>(c);
    if (c >= 'A' && c <= 'Z') fold[c] = static_cast<char>(c + 32);
  }
  return fold;
}();

#if defined(__SSE2__)
// Sixteen ASCII bytes at once: the folded bytes (A-Z lowered) and a mask of the token bytes
// (0-9, a-z, A-Z), bit i for byte i. Signed byte compares are exact here: every byte is below 0x80.
[[gnu::always_inline]] inline unsigned fold_ascii_block(__m128i block, __m128i& folded) {
  const auto within = [&](char lo, char hi) {
    return _mm_and_si128(_mm_cmpgt_epi8(block, _mm_set1_epi8(static_cast<char>(lo - 1))),
                         _mm_cmplt_epi8(block, _mm_set1_epi8(static_cast<char>(hi + 1))));
  };
  const __m128i upper = within('A', 'Z');
  folded = _mm_add_epi8(block, _mm_and_si128(upper, _mm_set1_epi8(0x20)));
  return static_cast<unsigned>(
      _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(upper, within('a', 'z')), within('0', '9'))));
}
#endif

}  // namespace

// Two passes: the tokens first (folded, filtered), then their stem ids. Looking tokens up one by
// one as they ended left every cache miss of the stem cache (a large table, random slots) to stall
// the tokenizer; hashed ahead, the slots of the next tokens are prefetched while one is looked up.
// The tokenizer takes sixteen bytes at a time while they are ASCII (byte by byte it was 26–31% of a
// parser's profile: tests/bench/results/indexing.md) and decodes code points only around other bytes; both
// write into folded_ through an offset, the tokens back to back, with 16 bytes of slack for the
// block copies.
void Analyzer::analyze_stems(std::string_view text, std::vector<uint32_t>& stems) {
  spans_.clear();
  // Folding never lengthens a token (case_fold keeps or shortens each code point's UTF-8), so the
  // input's size bounds the output; the slow path checks anyway. The buffer only grows (resizing
  // a string fills what it adds).
  if (folded_.size() < text.size() + 32) folded_.resize(text.size() + 32);
  size_t out = 0;    // where the next folded byte goes
  size_t start = 0;  // where the current token starts: out > start inside a token
  size_t pos = 0;
  const char* const in = text.data();
  while (pos < text.size()) {
#if defined(__SSE2__)
    if (pos + 16 <= text.size()) {
      const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + pos));
      if (_mm_movemask_epi8(block) == 0) {  // all ASCII
        __m128i folded;
        const unsigned mask = fold_ascii_block(block, folded);
        if (mask == 0xFFFF) {  // inside a token (or starting one) throughout
          _mm_storeu_si128(reinterpret_cast<__m128i*>(folded_.data() + out), folded);
          out += 16, pos += 16;
          continue;
        }
        alignas(16) char bytes[32];  // the folded block, then room for a 16-byte load from any offset
        _mm_store_si128(reinterpret_cast<__m128i*>(bytes), folded);
        _mm_store_si128(reinterpret_cast<__m128i*>(bytes + 16), _mm_setzero_si128());
        for (unsigned bit = 0; bit < 16;) {
          const unsigned rest = mask >> bit;  // zero above the block's end
          if ((rest & 1) == 0) {              // separators: the token before them ends
            if (out > start) start = out = end_token(start, out);
            bit = rest == 0 ? 16 : bit + static_cast<unsigned>(std::countr_zero(rest));
            continue;
          }
          const unsigned run = static_cast<unsigned>(std::countr_one(rest));  // token bytes from bit
          _mm_storeu_si128(reinterpret_cast<__m128i*>(folded_.data() + out),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + bit)));
          out += run, bit += run;
        }
        pos += 16;
        continue;
      }
    }
#endif
    const auto byte = static_cast<unsigned char>(in[pos]);
    if (byte < 0x80) {
      ++pos;
      if (const char folded = kAsciiFold[byte]) {
        folded_[out++] = folded;
      } else if (out > start) {
        start = out = end_token(start, out);
      }
      continue;
    }
    const char32_t cp = utf8_next(text, pos);
    if (is_token_char(cp)) {
      if (out + 4 + 16 > folded_.size()) folded_.resize(2 * folded_.size() + 32);
      out = utf8_write(folded_.data(), out, case_fold(cp));
    } else if (out > start) {
      start = out = end_token(start, out);
    }
  }
  if (out > start) out = end_token(start, out);
  if (folded_.size() < out + 8) folded_.resize(out + 8);  // hash_padded's slack (the slow path may have grown it)

  constexpr size_t kAhead = 8;
  const std::string_view all(folded_.data(), out);
  hashes_.resize(spans_.size());
  for (size_t i = 0; i < spans_.size(); ++i) {
    hashes_[i] = StemCache::hash_padded(all.substr(spans_[i].first, spans_[i].second));
    if (i < kAhead) prefetch(hashes_[i]);
  }
  for (size_t i = 0; i < spans_.size(); ++i) {
    if (i + kAhead < spans_.size()) prefetch(hashes_[i + kAhead]);
    stems.push_back(stem_id(all.substr(spans_[i].first, spans_[i].second), hashes_[i]));
  }
}

void Analyzer::analyze(std::string_view text, std::vector<std::string>& terms) {
  scratch_.clear();
  analyze_stems(text, scratch_);
  for (uint32_t id : scratch_) terms.emplace_back(stem(id));
  trim_stem_cache();
}

std::vector<std::string> Analyzer::analyze_query(std::string_view text) {
  dropping_stopwords_ = true;
  std::vector<std::string> terms;
  try {
    analyze(text, terms);
  } catch (...) {
    dropping_stopwords_ = false;
    throw;
  }
  dropping_stopwords_ = false;
  return terms.empty() ? analyze(text) : terms;
}

}  // namespace warp
