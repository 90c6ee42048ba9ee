// The query syntax: its clauses and errors, the Query it analyzes into (bare words exactly as a
// plain query, on the test collections' own queries), and constrained queries (+required,
// -excluded) on the CPU processor against the brute-force reference on random collections, every
// mode and OR algorithm, one and several partitions.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/analysis/analyzer.hpp"
#include "common/index/index_builder.hpp"
#include "common/query/query_syntax.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/query/query_log.hpp"
#include "tests/bench/synthetic_collection.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/in_memory_index.hpp"
#include "tests/support/test_data.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"

namespace warp {
namespace {

std::string describe(const std::vector<QueryClause>& clauses) {
  std::string out;
  for (const QueryClause& c : clauses) {
    out += c.occur == Occur::kMust ? "+" : c.occur == Occur::kMustNot ? "-" : "";
    if (!c.field.empty()) out += c.field + ":";
    out += c.phrase ? "\"" + c.text + "\"" : "[" + c.text + "]";
    out += "@" + std::to_string(c.column) + " ";
  }
  return out;
}

TEST(QuerySyntax, ParsesClauses) {
  EXPECT_EQ(describe(parse_query_syntax("heat  transfer")), "[heat]@1 [transfer]@7 ");
  EXPECT_EQ(describe(parse_query_syntax("+heat -flux wing")), "+[heat]@1 -[flux]@7 [wing]@13 ");
  EXPECT_EQ(describe(parse_query_syntax("\"shock wave\" -\"boundary layer\"")),
            "\"shock wave\"@1 -\"boundary layer\"@14 ");
  EXPECT_EQ(describe(parse_query_syntax("title:wing +body:\"lift drag\"")), "title:[wing]@1 +body:\"lift drag\"@12 ");
  // A lone operator is punctuation; inside a word, + and - are the word's.
  EXPECT_EQ(describe(parse_query_syntax("a - b + c e-mail c++")), "[a]@1 [b]@5 [c]@9 [e-mail]@11 [c++]@18 ");
  // A colon without a word after it, or after a non-name, is text.
  EXPECT_EQ(describe(parse_query_syntax("ratio: 2 3:4 a::b")), "[ratio:]@1 [2]@8 [3:4]@10 [a::b]@14 ");
  // Escapes: the next character taken as it is.
  EXPECT_EQ(describe(parse_query_syntax(R"(\-dash \"q\" a\:b x\)")), R"([-dash]@1 ["q"]@8 [a:b]@14 [x\]@19 )");
  // A quote inside a word begins a phrase of its own.
  EXPECT_EQ(describe(parse_query_syntax("ab\"c d\"")), "[ab]@1 \"c d\"@3 ");
  EXPECT_TRUE(parse_query_syntax("  \t ").empty());
}

TEST(QuerySyntax, RefusesWhatItCannotParseWithTheColumn) {
  const auto column_of = [](std::string_view q) {
    try {
      parse_query_syntax(q);
    } catch (const QuerySyntaxError& e) {
      EXPECT_NE(std::string(e.what()).find("column " + std::to_string(e.column())), std::string::npos) << e.what();
      return e.column();
    }
    return size_t{0};
  };
  EXPECT_EQ(column_of("wing \"lift drag"), 6u);
  EXPECT_EQ(column_of("a +-b"), 3u);
  EXPECT_EQ(column_of("a title:-b"), 9u);
  EXPECT_EQ(column_of("a \"b\" \""), 7u);
  EXPECT_EQ(column_of("a \"b\" c"), 0u);
}

TEST(QuerySyntax, AnalyzesIntoScoredTermsAndConstraints) {
  Analyzer analyzer;
  const Query q = analyze_query_syntax("+Heating of -flux -the wings +the", analyzer, QueryMode::kOr, 10);
  // Scored: the bare and required words as a plain query takes them ("of", "the" are stop words,
  // so "+the" requires nothing); an excluded stop word is excluded as written.
  EXPECT_EQ(q.terms, analyzer.analyze_query("Heating of wings the"));
  EXPECT_EQ(q.required, std::vector<std::string>{"heat"});
  EXPECT_EQ(q.excluded, (std::vector<std::vector<std::string>>{{"flux"}, {"the"}}));

  const Query grouped = analyze_query_syntax("wing -heat-transfer -flux", analyzer, QueryMode::kOr, 10);
  EXPECT_EQ(grouped.excluded, (std::vector<std::vector<std::string>>{{"flux"}, {"heat", "transfer"}}));
  EXPECT_FALSE(analyze_query_syntax("wing", analyzer, QueryMode::kOr, 10).constrained());
  for (const char* q : {"-wing", "-wing -flux", "-the -of", "title:wing", "-\"lift drag\"", "wing \"open"}) {
    EXPECT_THROW(analyze_query_syntax(q, analyzer, QueryMode::kOr, 10), QuerySyntaxError) << q;
  }
}

TEST(QuerySyntax, PhrasesKeepTheirStopWordsAndRequireTheirScoredWords) {
  Analyzer analyzer;
  const Query q = analyze_query_syntax("\"Heating of the Wings\" drag -\"boundary layers\" \"flux\" -\"shock\"",
                                       analyzer, QueryMode::kOr, 10);
  EXPECT_EQ(q.terms, analyzer.analyze_query("Heating of the Wings drag flux"));
  EXPECT_EQ(q.phrases, (std::vector<std::vector<std::string>>{{"heat", "of", "the", "wing"}}));
  EXPECT_EQ(q.excluded_phrases, (std::vector<std::vector<std::string>>{{"boundari", "layer"}}));
  // A phrase's scored words are required (its stop words are not scored); a phrase of one word is
  // that word, required or excluded.
  EXPECT_EQ(q.required, (std::vector<std::string>{"flux", "heat", "wing"}));
  EXPECT_EQ(q.excluded, (std::vector<std::vector<std::string>>{{"shock"}}));
  EXPECT_TRUE(q.constrained() && q.has_phrases() && !q.filtered_alone());
  // All stop words: scored and matched as written.
  const Query stops = analyze_query_syntax("\"to be or not to be\"", analyzer, QueryMode::kAnd, 10);
  EXPECT_EQ(stops.phrases, (std::vector<std::vector<std::string>>{{"to", "be", "or", "not", "to", "be"}}));
  EXPECT_EQ(stops.terms, analyzer.analyze_query("to be or not to be"));
  EXPECT_TRUE(analyze_query_syntax("\"...\" wing", analyzer, QueryMode::kOr, 10).phrases.empty());
}

// Every query of Cranfield and CISI without the syntax's characters analyzes as a plain query does,
// term for term: bare words keep their answers.
TEST(QuerySyntax, BareWordsAreAPlainQuery) {
  Analyzer analyzer;
  size_t compared = 0;
  for (const char* collection : {"cranfield", "cisi"}) {
    std::vector<std::string> errors;
    for (const QueryLine& topic :
         read_query_file(testing::test_data_dir() + "/" + collection + "/queries.tsv", errors)) {
      bool plain = topic.text.find('"') == std::string::npos && topic.text.find('\\') == std::string::npos;
      for (const QueryClause& clause : plain ? parse_query_syntax(topic.text) : std::vector<QueryClause>{})
        plain = plain && clause.occur == Occur::kShould && clause.field.empty();
      if (!plain) continue;
      const Query parsed = analyze_query_syntax(topic.text, analyzer, QueryMode::kOr, 10);
      ASSERT_EQ(parsed.terms, analyzer.analyze_query(topic.text)) << collection << " " << topic.id;
      ASSERT_FALSE(parsed.constrained());
      ++compared;
    }
  }
  EXPECT_GT(compared, 200u);
}

// Random constraints over random collections: every mode and OR algorithm equals the brute-force
// top k of the documents allowed.
TEST(ConstrainedQueries, MatchBruteForceOnRandomCollections) {
  for (uint32_t partitions : {1u, 3u}) {
    const uint64_t seed = testing::test_seed() + 97 + partitions;
    std::mt19937_64 rng(seed);
    synthetic::CollectionParams params;
    params.documents = std::uniform_int_distribution<uint32_t>(2000, 6000)(rng);
    params.vocabulary = std::uniform_int_distribution<uint32_t>(40, 600)(rng);
    params.mean_length = std::uniform_real_distribution<double>(8, 40)(rng);
    params.seed = seed;
    BuildOptions options;
    options.partitions = partitions;
    IndexBuilder builder(options);
    testing::BruteForceIndex reference;
    synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
      builder.add_analyzed({"", "", "", 0, {}}, terms);
      reference.add(terms);
    });
    const std::vector<BuiltPartition> built = builder.build();
    const auto term = [&] { return "t" + std::to_string(std::uniform_int_distribution<uint32_t>(0, 60)(rng)); };
    for (OrAlgorithm algorithm : {OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand, OrAlgorithm::kTiles}) {
      const testing::InMemoryIndex index(built, algorithm);
      for (int q = 0; q < 150; ++q) {
        Query query({}, QueryMode::kOr, std::vector<size_t>{1, 10, 100}[q % 3]);
        const int scored = std::uniform_int_distribution<int>(1, 4)(rng);
        for (int i = 0; i < scored; ++i) query.terms.push_back(term());
        if (q % 2 == 0) query.required.push_back(query.terms[static_cast<size_t>(q / 2) % query.terms.size()]);
        for (int g = q % 3; g > 0; --g)
          query.excluded.push_back(g == 1 ? std::vector{term()} : std::vector{term(), term()});
        if (q == 7) query.required.push_back("no-such-term");
        for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd, QueryMode::kAndOr}) {
          query.mode = mode;
          ASSERT_TRUE(testing::same_topk(reference.search(query), index.search(query), reference, query.terms))
              << "query " << q << " mode " << to_string(mode) << " algorithm " << or_algorithm_name(algorithm)
              << " partitions " << partitions << " seed " << seed;
        }
      }
    }
  }
}

}  // namespace
}  // namespace warp
