#include <gtest/gtest.h>

#include <random>

#include "common/analysis/analyzer.hpp"
#include "common/analysis/utf8.hpp"
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
  EXPECT_EQ(analyzer.analyze("ŁÓDŹ ŽLUŤOUČKÝ ĞÜNEŞ İSTANBUL Œuvre"), (Terms{"łódź", "žluťoučký", "ğüneş", "istanbul", "œuvre"}));
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
  EXPECT_EQ(analyzer.analyze("wing\xff\xfe" "flap \xc3"), (Terms{"wing", "flap"}));
  EXPECT_EQ(analyzer.analyze(std::string("a\0b", 3)), (Terms{"a", "b"}));
  std::mt19937_64 rng(testing::test_seed());
  for (int i = 0; i < 2000; ++i) {  // random bytes: never a crash, always valid UTF-8 terms
    std::string bytes(std::uniform_int_distribution<size_t>(0, 64)(rng), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (const std::string& term : analyzer.analyze(bytes)) ASSERT_TRUE(utf8_valid(term)) << term;
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
