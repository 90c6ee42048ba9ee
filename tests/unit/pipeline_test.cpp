// The parallel indexing pipeline builds exactly the partitions of the in-memory builder, from
// every input format, with duplicates, with run files spilled; and its dictionary pieces work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "indexer/document_reader.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/pipeline/term_btree.hpp"
#include "indexer/pipeline/trie_collections.hpp"
#include "tests/support/format_writers.hpp"
#include "tests/support/shared_data.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

void expect_same_partitions(const std::vector<BuiltPartition>& expected, const std::vector<BuiltPartition>& actual,
                            const std::string& context) {
  ASSERT_EQ(expected.size(), actual.size()) << context;
  for (size_t p = 0; p < expected.size(); ++p) {
    const IndexView& a = expected[p].view;
    const IndexView& b = actual[p].view;
    ASSERT_EQ(a.meta.doc_begin, b.meta.doc_begin) << context << " partition " << p;
    ASSERT_EQ(a.meta.doc_end, b.meta.doc_end) << context;
    EXPECT_EQ(a.meta.stats.doc_count, b.meta.stats.doc_count) << context;
    EXPECT_EQ(a.meta.stats.total_length, b.meta.stats.total_length) << context;
    EXPECT_EQ(a.meta.posting_count, b.meta.posting_count) << context;
    EXPECT_EQ(a.doc_lengths, b.doc_lengths) << context;
    EXPECT_EQ(a.external_ids, b.external_ids) << context;
    ASSERT_EQ(a.lexicon.size(), b.lexicon.size()) << context;
    for (const auto& [term, info] : a.lexicon) {
      const TermInfo* other = b.find(term);
      ASSERT_NE(other, nullptr) << context << " term " << term;
      ASSERT_EQ(info.df, other->df) << term;
      ASSERT_EQ(info.cf, other->cf) << term;
      // Same postings and the same encoded bytes (block maxima included).
      ASSERT_TRUE(std::equal(a.postings.begin() + info.offset, a.postings.begin() + info.offset + info.words,
                             b.postings.begin() + other->offset, b.postings.begin() + other->offset + other->words))
          << context << " term " << term;
    }
  }
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-pipeline-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::vector<BuiltPartition> reference(const std::vector<std::string>& inputs, const BuildOptions& options) {
    ReadReport report;
    IndexBuilder builder(options);
    for (const auto& doc : read_documents(inputs, report)) builder.add_document(doc);
    return builder.build();
  }

  std::vector<BuiltPartition> pipeline(const std::vector<std::string>& inputs, pipeline::PipelineOptions options,
                                       pipeline::PipelineReport& report) {
    DocumentStream stream(inputs);
    options.spill_dir = path("runs");
    return pipeline::build_with_pipeline(stream, options, report);
  }
  fs::path dir_;
};

TEST_F(PipelineTest, CranfieldInEveryFormatWithSpilledRunsMatchesTheBuilder) {
  ReadReport report;
  const auto docs = read_documents({testing::shared_data_dir() + "/cranfield/docs.jsonl"}, report);
  testing::write_trec(path("cran.trec"), docs);
  testing::write_warc(path("cran.warc.gz"), docs, true);
  pipeline::PipelineOptions options;
  options.build.partitions = 3;
  options.build.codec = "pfor-block";
  options.parsers = 3;
  options.indexers = 2;
  options.batch_documents = 37;
  options.memory_budget = 64 << 10;  // tiny: runs spill to disk and are merged back
  const auto expected = reference({testing::shared_data_dir() + "/cranfield/docs.jsonl"}, options.build);
  for (const std::string& input : {testing::shared_data_dir() + "/cranfield/docs.jsonl", path("cran.trec"), path("cran.warc.gz")}) {
    pipeline::PipelineReport pipeline_report;
    const auto actual = pipeline({input}, options, pipeline_report);
    EXPECT_GT(pipeline_report.runs_written, 2u) << input;
    EXPECT_EQ(pipeline_report.runs_written, pipeline_report.runs_merged) << input;
    expect_same_partitions(expected, actual, input);
  }
  EXPECT_FALSE(fs::exists(path("runs"))) << "run files are removed after the merge";
}

// The default corpus (GCIDE entries, converted by deploy/corpus/gcide_to_jsonl.py --limit into the
// file WARP_DEFAULT_CORPUS_SAMPLE names; ctest's fixture makes it) in all three formats.
TEST_F(PipelineTest, DefaultCorpusInEveryFormatMatchesTheBuilder) {
  const char* sample = std::getenv("WARP_DEFAULT_CORPUS_SAMPLE");
  ASSERT_NE(sample, nullptr) << "set WARP_DEFAULT_CORPUS_SAMPLE (ctest does, from deploy/corpus/gcide_to_jsonl.py)";
  ReadReport report;
  const auto docs = read_documents({sample}, report);
  ASSERT_GE(docs.size(), 1000u);
  testing::write_trec(path("gcide.trec"), docs);
  testing::write_warc(path("gcide.warc"), docs, false);
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.parsers = 2;
  options.indexers = 2;
  options.batch_documents = 100;
  options.memory_budget = 256 << 10;
  const auto expected = reference({sample}, options.build);
  for (const std::string& input : {std::string(sample), path("gcide.trec"), path("gcide.warc")}) {
    pipeline::PipelineReport pipeline_report;
    const auto actual = pipeline({input}, options, pipeline_report);
    expect_same_partitions(expected, actual, input);
  }
}

TEST_F(PipelineTest, DuplicatesAndManyFilesMatchTheBuilder) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::string> words = {"wing", "flap", "lift", "drag", "mach", "shock", "layer", "boundary", "über", "x1"};
  for (int f = 0; f < 3; ++f) {
    std::ofstream out(path("part" + std::to_string(f) + ".jsonl"));
    for (int d = 0; d < 500; ++d) {
      std::string body;
      for (int w = 0; w < 1 + static_cast<int>(rng() % 40); ++w) body += words[rng() % words.size()] + " ";
      out << R"({"id":"d)" << rng() % 900 << R"(","title":"t","body":")" << body << "\"}\n";  // many repeated ids
    }
  }
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.parsers = 2;
  options.indexers = 3;
  options.batch_documents = 50;
  pipeline::PipelineReport report;
  const auto actual = pipeline({dir_.string()}, options, report);
  expect_same_partitions(reference({dir_.string()}, options.build), actual, "duplicates");
}

TEST(TermForest, FindsWhatItInsertedInOrder) {
  std::mt19937_64 rng(testing::test_seed());
  pipeline::TermForest forest;
  std::map<std::pair<uint32_t, std::string>, uint32_t> expected;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (size_t n = rng() % 9; n > 0; --n) s += static_cast<char>('a' + rng() % 6);  // many shared prefixes
    const uint32_t collection = static_cast<uint32_t>(rng() % 3);
    const uint32_t id = forest.find_or_insert(collection, s);
    auto [it, inserted] = expected.try_emplace({collection, s}, id);
    ASSERT_EQ(it->second, id) << s;
    if (inserted) {
      ASSERT_EQ(id, forest.size() - 1);
    }
  }
  for (uint32_t collection = 0; collection < 3; ++collection) {
    std::vector<uint32_t> ids;
    forest.in_order(collection, ids);
    std::vector<std::string> walked;
    for (uint32_t id : ids) walked.push_back(forest.suffix(id));
    std::vector<std::string> sorted;
    for (const auto& [key, id] : expected) {
      if (key.first == collection) sorted.push_back(key.second);
    }
    EXPECT_EQ(walked, sorted) << "collection " << collection;
  }
}

TEST(TrieCollections, CoverEveryTerm) {
  EXPECT_EQ(pipeline::kTrieCollections, 17613u);
  EXPECT_EQ(pipeline::trie_collection("aaa"), 0u);
  EXPECT_EQ(pipeline::trie_collection("zzzebra"), 17575u);
  EXPECT_EQ(pipeline::trie_suffix("wingspan", pipeline::trie_collection("wingspan")), "gspan");
  EXPECT_EQ(pipeline::trie_collection("747"), 17576u + 7);
  EXPECT_EQ(pipeline::trie_collection("ox"), 17586u + ('o' - 'a'));
  EXPECT_EQ(pipeline::trie_collection("éclair"), pipeline::kTrieCollections - 1);
  EXPECT_EQ(pipeline::trie_suffix("éclair", pipeline::kTrieCollections - 1), "éclair");
}

}  // namespace
}  // namespace warp
