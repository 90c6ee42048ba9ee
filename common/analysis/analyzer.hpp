// The one text analyzer of Warpsearch, used for indexing and for query parsing alike:
// UTF-8 → split on non-alphanumeric code points → case fold → length cap → stop words → Porter2.
// Its version string is stored in every partition; a reader refuses a partition analyzed otherwise.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/analysis/shared_stem_cache.hpp"
#include "common/analysis/stem_cache.hpp"

struct sb_stemmer;

namespace warp {

struct AnalyzerConfig {
  bool stem = true;               // Snowball "english" (Porter2) through libstemmer
  bool remove_stopwords = false;  // Snowball's English stop-word list
  size_t max_token_bytes = 64;    // longer tokens (hashes, base64 noise) are dropped
  std::string version() const;    // e.g. "warp-analyzer/1 fold=latin-greek-cyrillic stem=porter2 stop=none max=64"
  static AnalyzerConfig from_version(const std::string& version);  // throws Error if unknown
};

// Not thread-safe (libstemmer keeps state): one Analyzer per thread. Cheap to construct.
class Analyzer {
 public:
  explicit Analyzer(AnalyzerConfig config = {});
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // Appends the analyzed terms of `text` in order (duplicates kept) to `terms`.
  void analyze(std::string_view text, std::vector<std::string>& terms);
  std::vector<std::string> analyze(std::string_view text) {
    std::vector<std::string> terms;
    analyze(text, terms);
    return terms;
  }
  // A query's terms: the same analysis, then English stop words dropped (measured to help on
  // Cranfield and CISI: tests/bench/results/relevance.md) unless every term is one ("the who" keeps both).
  // Documents keep their stop words, so this needs no other index.
  std::vector<std::string> analyze_query(std::string_view text);
  const AnalyzerConfig& config() const { return config_; }
  // Indexing's form: appends the stem ids of `text`'s terms (what analyze() gives, as ids into the
  // stem cache; stem() names them). Ids stay valid until trim_stem_cache(), which an indexer calls
  // between documents; nothing else empties the cache meanwhile. Ids below stable_stems() stay
  // valid across trims too.
  void analyze_stems(std::string_view text, std::vector<uint32_t>& stems);
  // The stem id of a token tokenized and folded elsewhere (the GPU analysis's misses): what
  // analyze_stems() gives for it. Only for a token within the length cap, and not a stop word
  // where they are removed.
  uint32_t folded_stem_id(std::string_view folded_token) {
    return stem_id(folded_token, StemCache::hash(folded_token));
  }
  std::string_view stem(uint32_t id) const {
    if (shared_ == nullptr) return cache_.stem(id);
    return id < shared_base_ ? shared_->stem(id) : cache_.stem(id - shared_base_);
  }
  // stem(id) soon, for a stable id (the shared cache's): its entry first, its text a little later.
  void prefetch_stable_entry(uint32_t id) const { shared_->prefetch_entry(id); }
  void prefetch_stable_text(uint32_t id) const { shared_->prefetch_text(id); }
  // Every id handed out is below it.
  size_t stem_count() const {
    if (shared_ == nullptr) return cache_.stems();
    return cache_.stems() > 0 ? shared_base_ + cache_.stems() : shared_->stems();
  }
  // Ids below it never change meaning (those of a shared cache); the others only within an epoch.
  size_t stable_stems() const { return shared_ == nullptr ? 0 : std::min<size_t>(shared_->stems(), shared_base_); }
  // Every stable id is below it: the shared cache's capacity (0 without one).
  size_t shared_stem_capacity() const { return shared_ == nullptr ? 0 : shared_->capacity(); }
  // Moves on whenever the own stem cache is emptied: stem ids from stable_stems() up kept across
  // documents are valid only within one epoch.
  uint64_t stem_cache_epoch() const { return cache_.epoch(); }
  // Empties the own stem cache once it holds more tokens than its limit.
  void trim_stem_cache() {
    if (cache_.tokens() <= stem_cache_limit_) return;
    cache_.clear();
    alias_.clear();
  }
  // At most `entries` tokens cached (2^18 by default) between trims: memory-bounded builds size it
  // from their budget, and the cache's tables are sized for that many up front (kStemCacheEntryBytes
  // each for a power of two).
  void limit_stem_cache(size_t entries) {
    stem_cache_limit_ = std::max<size_t>(entries, 1);
    cache_.reserve(stem_cache_limit_);
  }
  // Looks words up in `shared` (which outlives this analyzer) and fills it; the own cache (its
  // ids from the shared cache's final count up) then takes only the words the shared one cannot
  // hold once it is full. Ids then come from many threads: a word's id says nothing of its order.
  void share_stem_cache(SharedStemCache* shared) {
    shared_ = shared;
    shared_base_ = shared->capacity();
  }
  static constexpr size_t kStemCacheEntryBytes = StemCache::kEntryBytes;

 private:
  // Ends the token folded_[start, end): kept as a span if it passes the length cap and the stop
  // words. Returns where the next token starts: `end` if kept, `start` if dropped.
  size_t end_token(size_t start, size_t end);
  uint32_t stem_id(std::string_view token, uint64_t hash);  // from the cache, else stemmed and cached
  std::string_view stemmed(std::string_view token);         // valid until the next call
  [[gnu::always_inline]] void prefetch(uint64_t hash) const {
    if (shared_ != nullptr) {
      shared_->prefetch(hash);
    } else {
      cache_.prefetch(hash);
    }
  }

  AnalyzerConfig config_;
  bool dropping_stopwords_ = false;  // inside analyze_query
  sb_stemmer* stemmer_ = nullptr;
  StemCache cache_;
  SharedStemCache* shared_ = nullptr;
  uint32_t shared_base_ = 0;     // the own cache's ids are offset by it: the shared cache's count once frozen
  bool shared_frozen_ = false;   // seen frozen (and settled) by this analyzer
  std::vector<uint32_t> alias_;  // own stem id → the shared id of the same stem, or kMissing
  size_t stem_cache_limit_ = size_t{1} << 18;
  std::string folded_;                                // a text's kept tokens, folded, back to back (a prefix of it)
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // each kept token's offset and size in folded_
  std::vector<uint64_t> hashes_;                      // each kept token's StemCache::hash
  std::vector<uint32_t> scratch_;                     // analyze()'s ids
};

// Character classes used by the tokenizer (exposed for tests).
bool is_token_char(char32_t cp);
char32_t case_fold(char32_t cp);
bool is_english_stopword(std::string_view folded_token);

}  // namespace warp
