// Relevance on the judged collections of tests/data: Warpsearch's OR mode must come within
// 0.005 of Xapian 1.4 BM25 (k1 0.9, b 0.4, English stemming, OR, top 1000) on nDCG@10 and MAP:
// Cranfield (short technical queries; Xapian 0.338 / 0.283) and CISI (long natural-language
// requests with repeated words; Xapian 0.343 / 0.196). Also checks the evaluator on a
// hand-computed case.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/index/index_files.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/index_searcher.hpp"
#include "leaf/query/query_log.hpp"
#include "tests/support/test_data.hpp"
#include "tests/relevance/trec_eval.hpp"

namespace warp {
namespace {

TEST(TrecEval, HandComputedScores) {
  relevance::Qrels qrels{{"1", {{"a", 2}, {"b", 1}, {"c", 0}}}, {"2", {{"x", 1}}}};
  relevance::Run run{{"1", {"b", "c", "a"}}};  // query 2 has no results: it scores 0
  const relevance::Scores s = relevance::evaluate(qrels, run);
  EXPECT_EQ(s.queries, 2u);
  const double dcg = 1 / std::log2(2.0) + 2 / std::log2(4.0), idcg = 2 / std::log2(2.0) + 1 / std::log2(3.0);
  EXPECT_NEAR(s.ndcg_at_10, dcg / idcg / 2, 1e-12);
  EXPECT_NEAR(s.precision_at_10, 0.2 / 2, 1e-12);
  EXPECT_NEAR(s.map, (1.0 + 2.0 / 3) / 2 / 2, 1e-12);
}

struct Judged {
  const char* name;
  double xapian_ndcg_at_10, xapian_map;  // Xapian 1.4 BM25 (the collection's README)
  size_t judged_queries;
};

// OR top 1000 through the real path: an index on disk in 2 partitions, queries analyzed as the
// broker and warp-search analyze them, every partition searched and merged.
relevance::Scores evaluate_collection(const std::string& name) {
  const std::string data = testing::test_data_dir() + "/" + name;
  const auto dir =
      std::filesystem::temp_directory_path() / ("warp-relevance-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ReadReport report;
  BuildOptions options;
  options.partitions = 2;
  IndexBuilder builder(options);
  for (const SourceDocument& doc : read_documents({data + "/docs.jsonl"}, report)) builder.add_document(doc);
  write_index(builder.build(), dir.string());

  IndexSearcher searcher(open_index(dir.string()));
  std::vector<std::string> errors;
  Analyzer analyzer;
  relevance::Run run;
  for (const QueryLine& line : read_query_file(data + "/queries.tsv", errors)) {
    const QueryResult result = searcher.search({analyzer.analyze_query(line.text), QueryMode::kOr, 1000});
    for (const Hit& hit : result.hits) run[line.id].push_back(searcher.external_id(hit.doc));
  }
  std::filesystem::remove_all(dir);
  return relevance::evaluate(relevance::read_qrels(data + "/qrels.txt"), run);
}

class RelevanceTest : public ::testing::TestWithParam<Judged> {};

// Within 0.005 of Xapian 1.4's BM25 (k1 0.9, b 0.4, no stop words) on nDCG@10 and MAP. Warpsearch's
// defaults (tests/bench/results/relevance.md) score above it on both collections.
TEST_P(RelevanceTest, OrModeReachesXapianBm25) {
  const Judged& c = GetParam();
  const relevance::Scores scores = evaluate_collection(c.name);
  std::printf("%s OR top-1000: nDCG@10 %.4f, P@10 %.4f, MAP %.4f over %zu queries (Xapian %.3f / %.3f)\n", c.name,
              scores.ndcg_at_10, scores.precision_at_10, scores.map, scores.queries, c.xapian_ndcg_at_10, c.xapian_map);
  EXPECT_EQ(scores.queries, c.judged_queries);
  EXPECT_GE(scores.ndcg_at_10, c.xapian_ndcg_at_10 - 0.005);
  EXPECT_GE(scores.map, c.xapian_map - 0.005);
}

INSTANTIATE_TEST_SUITE_P(JudgedCollections, RelevanceTest,
                         ::testing::Values(Judged{"cranfield", 0.338, 0.283, 225}, Judged{"cisi", 0.343, 0.196, 76}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace warp
