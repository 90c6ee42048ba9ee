#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/analysis/analyzer.hpp"
#include "common/analysis/shared_stem_cache.hpp"
#include "common/analysis/stem_cache.hpp"
#include "common/analysis/token_slot.hpp"
#include "common/util/utf8.hpp"
#include "common/util/status.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

using Terms = std::vector<std::string>;

TEST(Analyzer, SplitsFoldsAndStems) {
  Analyzer analyzer;
  EXPECT_EQ(analyzer.analyze("Running RUNS, ran; the runner's"), (Terms{"run", "run", "ran", "the", "runner", "s"}));
  EXPECT_EQ(analyzer.analyze("  "), Terms{});
  EXPECT_EQ(analyzer.analyze("x86-64 A320"), (Terms{"x86", "64", "a320"}));
}

TEST(Analyzer, FoldsLatin1LatinExtendedGreekCyrillic) {
  AnalyzerConfig config;
  config.stem = false;
  Analyzer analyzer(config);
  EXPECT_EQ(analyzer.analyze("ÀÉÎÕÜ Ç Ñ"), (Terms{"àéîõü", "ç", "ñ"}));
  EXPECT_EQ(analyzer.analyze("ŁÓDŹ ŽLUŤOUČKÝ ĞÜNEŞ İSTANBUL Œuvre"),
            (Terms{"łódź", "žluťoučký", "ğüneş", "istanbul", "œuvre"}));
  EXPECT_EQ(analyzer.analyze("ΣΟΦΊΑ МОСКВА Ёлка"), (Terms{"σοφία", "москва", "ёлка"}));
  EXPECT_EQ(analyzer.analyze("a×b÷c «d» e—f"), (Terms{"a", "b", "c", "d", "e", "f"}));
}

TEST(Analyzer, StopWordsAndTokenCap) {
  AnalyzerConfig config;
  config.remove_stopwords = true;
  config.max_token_bytes = 10;
  Analyzer analyzer(config);
  EXPECT_EQ(analyzer.analyze("The wings of THE aircraft abcdefghijklmnop"), (Terms{"wing", "aircraft"}));
}

TEST(Analyzer, InvalidUtf8IsReplacedNeverFatal) {
  Analyzer analyzer;
  EXPECT_EQ(analyzer.analyze("wing\xff\xfe"
                             "flap \xc3"),
            (Terms{"wing", "flap"}));
  EXPECT_EQ(analyzer.analyze(std::string("a\0b", 3)), (Terms{"a", "b"}));
  std::mt19937_64 rng(testing::test_seed());
  for (int i = 0; i < 2000; ++i) {  // random bytes: never a crash, always valid UTF-8 terms
    std::string bytes(std::uniform_int_distribution<size_t>(0, 64)(rng), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (const std::string& term : analyzer.analyze(bytes)) ASSERT_TRUE(utf8_valid(term)) << term;
  }
}

// Random text of ASCII words, punctuation, Latin-1, Greek, Cyrillic, CJK, emoji and stray bytes.
std::string random_text(std::mt19937_64& rng, size_t pieces) {
  static const std::vector<std::string> parts = {
      "Wing", "WINGS", "flap", "running", "the",   "A320",           "x86",  " ", "  ",   ",",    "-",
      "'",    "\n",    "Über", "ÉCOLE",   "σοφία", "МОСКВА",         "東京", "😀", "\xff", "\xc3", "ŁÓDŹ",
      "İ",    "—",     "0",    "99",      "ſ",     "generalizations"};
  std::string text;
  for (size_t i = 0; i < pieces; ++i) text += parts[rng() % parts.size()];
  return text;
}

// The reference: decode every code point, split, fold, then the stemmer one token at a time.
Terms reference_analysis(std::string_view text, const AnalyzerConfig& config) {
  Analyzer single(config);
  Terms terms;
  std::string token;
  const auto flush = [&] {
    if (!token.empty()) {
      const Terms one = single.analyze(token);  // one token, no separators
      if (token.size() <= config.max_token_bytes) {
        EXPECT_LE(one.size(), 1u) << token;
      }
      terms.insert(terms.end(), one.begin(), one.end());
    }
    token.clear();
  };
  for (size_t pos = 0; pos < text.size();) {
    const char32_t cp = utf8_next(text, pos);
    if (is_token_char(cp)) {
      utf8_append(token, case_fold(cp));
    } else {
      flush();
    }
  }
  flush();
  return terms;
}

TEST(Analyzer, AsciiFastPathAndStemCacheMatchTheReference) {
  std::mt19937_64 rng(testing::test_seed());
  for (bool stem : {true, false}) {
    AnalyzerConfig config;
    config.stem = stem;
    config.max_token_bytes = 12;
    Analyzer cached(config), tiny(config);
    tiny.limit_stem_cache(1);  // emptied after every text
    for (int i = 0; i < 400; ++i) {
      const std::string text = random_text(rng, rng() % 40);
      const Terms expected = reference_analysis(text, config);
      ASSERT_EQ(cached.analyze(text), expected) << text;
      ASSERT_EQ(tiny.analyze(text), expected) << text;
    }
  }
}

// The tokenizer's sixteen-byte blocks: ASCII text whose tokens and separator runs start and end at
// every offset of a block, are longer than a block (and than the token cap), end at the text's
// end, with a non-ASCII character now and then (the block falls back to code points there).
TEST(Analyzer, AsciiBlocksMatchTheReferenceAtEveryOffset) {
  std::mt19937_64 rng(testing::test_seed());
  const std::string separators = " ,.-'\n\t/()\"!?;:_@#\x01\x7f";
  for (bool stop : {false, true}) {
    AnalyzerConfig config;
    config.stem = false;
    config.remove_stopwords = stop;
    config.max_token_bytes = 20;
    Analyzer analyzer(config);
    for (int i = 0; i < 3000; ++i) {
      std::string text;
      const size_t length = rng() % 120;
      while (text.size() < length) {
        const size_t word = rng() % 4 == 0 ? 14 + rng() % 24 : 1 + rng() % 8;  // across blocks, past the cap
        for (size_t c = 0; c < word; ++c) {
          const char* kinds[] = {"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"};
          const std::string_view kind = kinds[rng() % 3];
          text += kind[rng() % kind.size()];
        }
        if (rng() % 16 == 0) text += rng() % 2 ? "É" : "—";    // a token byte and a separator beyond ASCII
        if (rng() % 8 == 0) text += rng() % 2 ? "the" : "OF";  // stop words, alone or glued to a word
        for (size_t s = rng() % 3 + (rng() % 6 == 0 ? 17 : 0); s > 0; --s)
          text += separators[rng() % separators.size()];
      }
      ASSERT_EQ(analyzer.analyze(text), reference_analysis(text, config)) << text;
    }
  }
}

// Parsers sharing one cache that fills and freezes mid-way: each analyzer's terms stay the
// reference's, ids from the shared cache keep their stems across the own caches' trims.
// Parsers sharing one cache that fills and freezes mid-way (one segment, or segments opened as it
// fills): each analyzer's terms stay the reference's, ids from the shared cache keep their stems
// across the own caches' trims.
void check_parsers_sharing(SharedStemCache& shared) {
  const uint64_t seed = testing::test_seed();
  AnalyzerConfig config;
  config.max_token_bytes = 40;  // long tokens (past a slot's 23 bytes) too
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      Analyzer analyzer(config);
      analyzer.limit_stem_cache(8);
      analyzer.share_stem_cache(&shared);
      std::vector<uint32_t> ids;
      std::unordered_map<uint32_t, std::string> stable;  // every id below stable_stems() seen, and its stem
      for (int i = 0; i < 1500 && failures[t].empty(); ++i) {
        const std::string text = random_text(rng, rng() % 40) + (i % 7 == 0 ? " Counterrevolutionarinessess" : "");
        const Terms expected = reference_analysis(text, config);
        ids.clear();
        analyzer.trim_stem_cache();
        analyzer.analyze_stems(text, ids);
        Terms got;
        std::unordered_map<std::string, uint32_t> id_of_stem;  // one stem, one id (terms are counted by id)
        for (uint32_t id : ids) {
          got.emplace_back(analyzer.stem(id));
          if (id_of_stem.emplace(got.back(), id).first->second != id)
            failures[t] = "two ids for the stem " + got.back();
          if (id >= analyzer.stem_count()) failures[t] = "id " + std::to_string(id) + " not below stem_count()";
          if (id < analyzer.stable_stems() && !stable.emplace(id, got.back()).second && stable[id] != got.back()) {
            failures[t] = "stable id " + std::to_string(id) + " named " + stable[id] + ", now " + got.back();
          }
        }
        if (got != expected) failures[t] = "terms of \"" + text + "\" differ from the reference";
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
  EXPECT_TRUE(shared.frozen());
  EXPECT_LE(shared.stems(), shared.capacity());
}

TEST(Analyzer, ParsersSharingAStemCacheThatFreezesMatchTheReference) {
  SharedStemCache shared(256);  // frozen after a few hundred words
  check_parsers_sharing(shared);
  EXPECT_EQ(shared.segments(), 1u);
}

TEST(Analyzer, ParsersSharingAStemCacheThatGrowsMatchTheReference) {
  SharedStemCache shared(64, 64 + 128 + 256 + 512);  // four segments, then frozen
  check_parsers_sharing(shared);
  EXPECT_EQ(shared.segments(), 4u);
  EXPECT_EQ(shared.capacity(), 960u);
}

TEST(StemCache, PaddedHashIsTheHash) {
  std::mt19937_64 rng(testing::test_seed());
  for (int i = 0; i < 5000; ++i) {
    std::string buffer(rng() % 40 + 8, '\0');
    for (char& c : buffer) c = static_cast<char>(rng());  // the padding's bytes must not count
    const std::string_view text(buffer.data(), buffer.size() - 8);
    ASSERT_EQ(StemCache::hash_padded(text), StemCache::hash(text)) << text.size();
  }
}

// The slots' inline comparison against memcmp: every length a slot holds inline, the strings
// equal and then differing at each position in turn (first, last, the middles of overlapping
// loads), at unaligned offsets, with the bytes around them differing (nothing read past the end).
TEST(TokenSlot, EqualShortIsMemcmpAtEveryLengthAndPosition) {
  std::mt19937_64 random(testing::test_seed());
  char a[64], b[64];
  for (size_t n = 0; n <= TokenSlot::kInlineBytes; ++n) {
    for (size_t offset = 0; offset < 8; ++offset) {
      for (char& c : a) c = static_cast<char>(random());
      for (char& c : b) c = static_cast<char>(~a[&c - b]);  // every byte differs from a's
      std::memcpy(b + 1 + offset, a + offset, n);
      EXPECT_TRUE(TokenSlot::equal_short(a + offset, b + 1 + offset, n)) << n << " " << offset;
      for (size_t at = 0; at < n; ++at) {
        b[1 + offset + at] ^= static_cast<char>(1 << (random() % 8));
        EXPECT_FALSE(TokenSlot::equal_short(a + offset, b + 1 + offset, n)) << n << " " << offset << " " << at;
        EXPECT_NE(std::memcmp(a + offset, b + 1 + offset, n), 0);
        b[1 + offset + at] = a[offset + at];
      }
    }
  }
}

// Threads inserting the same words into `cache`: one id per stem, whatever thread asked first,
// found again afterwards. Returns how many distinct stems there were.
size_t check_one_id_per_stem(SharedStemCache& cache) {
  const uint64_t seed = testing::test_seed();
  constexpr int kThreads = 4;
  // Tokens of an alphabet of 3 (many repeats across threads), some past 23 bytes; a token's stem
  // is its first half, so several tokens share one.
  std::vector<std::unordered_map<std::string, uint32_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed);  // every thread the same words, in the same order: the most races
      for (int i = 0; i < 6000; ++i) {
        std::string token(1 + rng() % 30, 'a');
        for (char& c : token) c = static_cast<char>('a' + rng() % 3);
        const std::string stem = token.substr(0, 1 + token.size() / 2);
        const uint64_t h = StemCache::hash(token);
        uint32_t id = cache.find(token, h);
        if (id == SharedStemCache::kMissing) id = cache.insert(token, h, stem);
        seen[t][token] = id;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(cache.frozen());
  std::unordered_map<std::string, uint32_t> id_of_stem;
  for (const auto& [token, id] : seen[0]) {
    const std::string stem = token.substr(0, 1 + token.size() / 2);
    EXPECT_NE(id, SharedStemCache::kMissing) << token;
    if (id == SharedStemCache::kMissing) break;
    EXPECT_EQ(cache.stem(id), stem) << token;
    EXPECT_LT(id, cache.stems());
    const auto [it, inserted] = id_of_stem.emplace(stem, id);
    EXPECT_EQ(it->second, id) << "two ids for the stem " << stem;
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t].at(token), id) << token;
    EXPECT_EQ(cache.find(token, StemCache::hash(token)), id);
    EXPECT_EQ(cache.find_stem(stem), id);
  }
  EXPECT_EQ(cache.find("zzz", StemCache::hash("zzz")), SharedStemCache::kMissing);
  return id_of_stem.size();
}

TEST(SharedStemCache, ThreadsInsertingTheSameWordsGetOneIdPerStem) {
  SharedStemCache cache(1 << 14);
  check_one_id_per_stem(cache);
  EXPECT_EQ(cache.segments(), 1u);
}

// The same across segments opened while the threads insert: a stem first seen in an older segment
// keeps its id there, and no two segments name one stem.
TEST(SharedStemCache, ThreadsInsertingTheSameWordsAcrossGrowingSegmentsGetOneIdPerStem) {
  SharedStemCache cache(64, 1 << 15);
  const size_t stems = check_one_id_per_stem(cache);
  EXPECT_GE(cache.segments(), 4u) << stems << " stems";
  EXPECT_LE(cache.stems(), cache.capacity());
  EXPECT_GE(cache.stems(), stems);  // ids lost to races stay unused
}

TEST(SharedStemCache, FreezesWhenFullAndStillFindsWhatItHolds) {
  SharedStemCache cache(64);
  std::vector<std::pair<std::string, uint32_t>> held;
  for (int i = 0; !cache.frozen(); ++i) {
    const std::string token = "w" + std::to_string(i);
    const uint32_t id = cache.insert(token, StemCache::hash(token), token);
    if (id != SharedStemCache::kMissing) held.emplace_back(token, id);
  }
  EXPECT_EQ(held.size(), cache.capacity());
  EXPECT_EQ(cache.stems(), cache.capacity());
  EXPECT_EQ(cache.insert("new", StemCache::hash("new"), "new"), SharedStemCache::kMissing);
  for (const auto& [token, id] : held) {
    ASSERT_EQ(cache.find(token, StemCache::hash(token)), id);
    ASSERT_EQ(cache.stem(id), token);
  }
}

// Segments of 64, 128 and 256 (a fourth of 512 would pass the 500 allowed; one of 52 would be
// less than half the last): each opens when the last is full, its memory counted from then on;
// ids follow on; every token is found in its segment; frozen after the third.
TEST(SharedStemCache, OpensSegmentsAsItFillsThenFreezes) {
  SharedStemCache cache(64, 500);
  EXPECT_EQ(cache.capacity(), 448u);
  EXPECT_EQ(cache.memory_bytes(), cache.first_segment_bytes());
  std::vector<std::pair<std::string, uint32_t>> held;
  std::vector<size_t> segments_after;
  for (int i = 0; !cache.frozen(); ++i) {
    const std::string token = "w" + std::to_string(i);
    const uint32_t id = cache.insert(token, StemCache::hash(token), token);
    if (id == SharedStemCache::kMissing) continue;
    ASSERT_EQ(id, held.size());  // one thread: ids in order, none lost
    held.emplace_back(token, id);
    segments_after.push_back(cache.segments());
  }
  ASSERT_EQ(held.size(), 448u);
  EXPECT_EQ(segments_after[63], 1u);
  EXPECT_EQ(segments_after[64], 2u);
  EXPECT_EQ(segments_after[191], 2u);
  EXPECT_EQ(segments_after[192], 3u);
  EXPECT_EQ(cache.memory_bytes(), 448 * SharedStemCache::kEntryBytes);
  EXPECT_EQ(cache.stems(), 448u);
  for (const auto& [token, id] : held) {
    ASSERT_EQ(cache.find(token, StemCache::hash(token)), id) << token;
    ASSERT_EQ(cache.find_stem(token), id) << token;
    ASSERT_EQ(cache.stem(id), token);
  }
  // Frozen: a new stem is refused, and named nowhere.
  EXPECT_EQ(cache.insert("new", StemCache::hash("new"), "new"), SharedStemCache::kMissing);
  EXPECT_EQ(cache.find_stem("new"), SharedStemCache::kMissing);
}

// Many tokens of few stems: the token slots fill before the stems do, and open the next segment
// all the same.
TEST(SharedStemCache, FullTokenSlotsOpenTheNextSegment) {
  SharedStemCache cache(64, 64 + 128);
  for (int i = 0; i < 150; ++i) {
    const std::string token = "t" + std::to_string(i);
    const std::string stem = "s" + std::to_string(i % 5);
    const uint32_t id = cache.insert(token, StemCache::hash(token), stem);
    ASSERT_NE(id, SharedStemCache::kMissing) << i;
    ASSERT_EQ(cache.stem(id), stem);
  }
  EXPECT_EQ(cache.segments(), 2u);
  EXPECT_EQ(cache.stems(), 5u);
  for (int i = 0; i < 150; ++i) {
    const std::string token = "t" + std::to_string(i);
    ASSERT_EQ(cache.stem(cache.find(token, StemCache::hash(token))), "s" + std::to_string(i % 5)) << token;
  }
}

// A cache large enough that each thread takes its text room and token counts in blocks and
// settles its ids on a count of its own (SharedStemCache::kBlocksFrom): eight threads inserting
// words half of which all of them see (the same order: the most races) and half their own, over
// segments that open under them (2^14, 2^15, 2^16 tokens, then frozen); then the same into one
// segment that freezes. Each stem one id, named by every thread alike, found by token and by stem,
// its text intact; a close waits for the ids every thread has settled.
TEST(SharedStemCache, ThreadsTakingBlocksGetOneIdPerStemAcrossSegmentsAndAFreeze) {
  for (const size_t most : {size_t{7} << 14, size_t{1} << 14}) {
    SharedStemCache cache(1 << 14, most);
    const uint64_t seed = testing::test_seed();
    constexpr int kThreads = 8;
    std::vector<std::unordered_map<std::string, uint32_t>> seen(kThreads);
    std::vector<std::thread> threads;
    const auto stem_of = [](const std::string& token) { return token.substr(0, 2 + token.size() / 2); };
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 shared(seed), own(seed + 1 + t);
        for (int i = 0; i < 20000; ++i) {
          std::mt19937_64& rng = i % 2 ? own : shared;
          std::string token(3 + rng() % 12, 'a');
          for (char& c : token) c = static_cast<char>('a' + rng() % 26);
          const uint64_t h = StemCache::hash(token);
          uint32_t id = cache.find(token, h);
          if (id == SharedStemCache::kMissing) id = cache.insert(token, h, stem_of(token));
          seen[t][token] = id;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (most > (1 << 14)) {
      EXPECT_GE(cache.segments(), 3u);
    } else {
      EXPECT_TRUE(cache.frozen());
    }
    cache.wait_until_settled();
    std::unordered_map<std::string, uint32_t> id_of_stem;
    std::unordered_map<std::string, uint32_t> id_of_token;
    size_t named = 0;
    for (const auto& by_thread : seen) {
      for (const auto& [token, id] : by_thread) {
        if (id == SharedStemCache::kMissing) continue;  // frozen before it was named
        ++named;
        ASSERT_LT(id, cache.stems());
        ASSERT_EQ(cache.stem(id), stem_of(token)) << token;
        const auto [stem_it, new_stem] = id_of_stem.emplace(stem_of(token), id);
        ASSERT_EQ(stem_it->second, id) << "two ids for the stem " << stem_of(token);
        const auto [token_it, new_token] = id_of_token.emplace(token, id);
        ASSERT_EQ(token_it->second, id) << "two ids for the token " << token;
        ASSERT_EQ(cache.find_stem(stem_of(token)), id) << token;
        const uint32_t found = cache.find(token, StemCache::hash(token));
        if (found != SharedStemCache::kMissing) {  // a token past the last segment's room stays uncached
          ASSERT_EQ(found, id) << token;
        }
      }
    }
    if (most > (1 << 14)) {
      EXPECT_GT(named, size_t{kThreads} * 10000) << "the words all threads see are named by each";
      EXPECT_GT(id_of_stem.size(), size_t{1} << 14) << "more stems than the first segment holds";
    } else {
      EXPECT_GT(id_of_stem.size(), size_t{1} << 13) << "a frozen segment's stems";
      EXPECT_LE(id_of_stem.size(), cache.capacity());
    }
  }
}

TEST(Analyzer, StemIdsNameTheTermsAndShareAStem) {
  Analyzer analyzer;
  std::vector<uint32_t> ids;
  analyzer.analyze_stems("Running runs RUN runner", ids);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(analyzer.stem(ids[0]), "run");
  EXPECT_EQ(ids[0], ids[1]);  // two tokens, one stem, one id
  EXPECT_EQ(ids[0], ids[2]);
  EXPECT_EQ(analyzer.stem(ids[3]), "runner");
  EXPECT_EQ(analyzer.stem_count(), 2u);
  analyzer.limit_stem_cache(2);
  analyzer.trim_stem_cache();  // 4 tokens cached (running, runs, run, runner): over the limit
  EXPECT_EQ(analyzer.stem_count(), 0u);
  ids.clear();
  analyzer.analyze_stems("runner", ids);
  EXPECT_EQ(analyzer.stem(ids[0]), "runner");
}

TEST(StemCache, AgreesWithAHashMapThroughGrowthAndClears) {
  std::mt19937_64 rng(testing::test_seed());
  StemCache cache;
  std::unordered_map<std::string, std::string> reference;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20000; ++i) {
      std::string token(1 + rng() % 40, 'a');  // past the 23 bytes a slot holds, too
      if (rng() % 2) {
        for (char& c : token) c = static_cast<char>('a' + rng() % 4);  // short alphabet: many repeats
      } else {
        token.assign(token.size(), static_cast<char>('a' + rng() % 4));  // long ones that repeat
      }
      const std::string stem = token.substr(0, 1 + token.size() / 2);
      const uint32_t found = cache.find(token);
      if (reference.count(token)) {
        ASSERT_NE(found, StemCache::kMissing) << token;
        ASSERT_EQ(cache.stem(found), reference[token]);
      } else {
        ASSERT_EQ(found, StemCache::kMissing) << token;
        const uint32_t id = cache.insert(token, stem);
        ASSERT_EQ(cache.stem(id), stem);
        reference[token] = stem;
      }
    }
    ASSERT_EQ(cache.tokens(), reference.size());
    std::unordered_map<std::string, int> distinct_stems;
    for (const auto& [token, stem] : reference) ++distinct_stems[stem];
    ASSERT_EQ(cache.stems(), distinct_stems.size());
    cache.clear();
    reference.clear();
    ASSERT_EQ(cache.find("ab"), StemCache::kMissing);
  }
}

TEST(Utf8, DecodesAndRejectsMalformedSequences) {
  EXPECT_TRUE(utf8_valid("héllo €𝄞"));
  EXPECT_FALSE(utf8_valid("\xc0\xaf"));          // overlong
  EXPECT_FALSE(utf8_valid("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(utf8_valid("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(utf8_valid("\xe2\x82"));          // truncated
  EXPECT_EQ(utf8_sanitize("a\xe2\x82z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8_sanitize("ok €"), "ok €");
}

TEST(AnalyzerConfig, VersionRoundTrips) {
  for (bool stem : {true, false}) {
    for (bool stop : {true, false}) {
      AnalyzerConfig config;
      config.stem = stem;
      config.remove_stopwords = stop;
      config.max_token_bytes = 40;
      const AnalyzerConfig parsed = AnalyzerConfig::from_version(config.version());
      EXPECT_EQ(parsed.version(), config.version());
    }
  }
  EXPECT_THROW(AnalyzerConfig::from_version("lucene-standard/9"), Error);
}

}  // namespace
}  // namespace warp
