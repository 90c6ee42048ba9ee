// Relevance on Cranfield: Warpsearch's OR mode must reach at least nDCG@10 0.328 and MAP 0.273,
// i.e. within 0.01 of Xapian 1.4 BM25 (k1=0.9, b=0.4, English stemming, OR, top 1000), which
// scores 0.338 and 0.283 there. Also checks the evaluator on a hand-computed case.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/index/index_files.hpp"
#include "indexer/document_reader.hpp"
#include "leaf/query/index_searcher.hpp"
#include "leaf/query/query_log.hpp"
#include "tests/support/shared_data.hpp"
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

TEST(CranfieldRelevance, OrModeReachesXapianBm25) {
  const std::string data = testing::shared_data_dir() + "/cranfield";
  const auto dir = std::filesystem::temp_directory_path() / ("warp-cranfield-" + std::to_string(::getpid()));
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
    const QueryResult result = searcher.search({analyzer.analyze(line.text), QueryMode::kOr, 1000});
    for (const Hit& hit : result.hits) run[line.id].push_back(searcher.external_id(hit.doc));
  }
  const relevance::Scores scores = relevance::evaluate(relevance::read_qrels(data + "/qrels.txt"), run);
  std::printf("Cranfield OR top-1000: nDCG@10 %.4f, P@10 %.4f, MAP %.4f over %zu queries\n", scores.ndcg_at_10,
              scores.precision_at_10, scores.map, scores.queries);
  EXPECT_EQ(scores.queries, 225u);
  EXPECT_GE(scores.ndcg_at_10, 0.328);
  EXPECT_GE(scores.map, 0.273);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace warp
