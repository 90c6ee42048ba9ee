// Documents' stored forms: kept by both builders in every partition's stored family and read back
// exactly as given (a JSONL line byte for byte, any fields; TREC and WARC input as an object of
// their fields), found by external id, the last copy of a duplicate id kept; --no-store keeps none
// and changes nothing else.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "common/index/index_files.hpp"
#include "common/index/partition_digest.hpp"
#include "common/index/partition_store.hpp"
#include "common/index/stored_source.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/reader/document_reader.hpp"
#include "tests/support/format_writers.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

class StoredDocumentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-stored-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Random text of ASCII words, accented and CJK letters, quotes, backslashes and control characters.
std::string random_text(std::mt19937_64& rng, size_t words) {
  static const std::vector<std::string> pieces = {"wing",      "über",  "東京", "flow",   "\"quoted\"", "back\\slash",
                                                  "tab\there", "naïve", "x1",   "émigré", "<b>",        "&amp;"};
  std::string text;
  for (size_t w = 0; w < words; ++w) text += pieces[rng() % pieces.size()] + (rng() % 7 == 0 ? "\n" : " ");
  return text;
}

// Every partition of the index in `dir`, opened.
std::vector<std::unique_ptr<Partition>> open_all(const std::string& dir) { return open_index(dir); }

// The document with `id` in any partition, and its stored form.
std::optional<std::string> source_of(const std::vector<std::unique_ptr<Partition>>& partitions, const std::string& id) {
  for (const auto& partition : partitions) {
    if (auto doc = partition->find(id)) return partition->source(*doc);
  }
  return std::nullopt;
}

TEST_F(StoredDocumentsTest, JsonLinesComeBackByteForByteWithEveryFieldAndTheLastCopyOfAnId) {
  std::mt19937_64 rng(testing::test_seed());
  std::map<std::string, std::string> expected;  // id -> its last line
  {
    std::ofstream out(path("docs.jsonl"));
    for (int d = 0; d < 800; ++d) {
      const std::string id = "d" + std::to_string(rng() % 600);  // repeated ids: the last line wins
      nlohmann::json doc = {{"id", id}, {"title", random_text(rng, 3)}, {"body", random_text(rng, 1 + rng() % 60)}};
      if (rng() % 2) doc["lang"] = rng() % 2 ? "en" : "fr";
      if (rng() % 2) doc["year"] = 1950 + static_cast<int>(rng() % 70);
      if (rng() % 3 == 0) doc["tags"] = {{"a", 1}, {"b", {1, 2, 3}}};
      // Some lines keep non-ASCII as is, some escape it; some have blanks around them.
      const std::string line = doc.dump(-1, ' ', rng() % 2 == 0);
      out << (rng() % 4 == 0 ? "  " : "") << line << (rng() % 4 == 0 ? " \r" : "") << "\n";
      expected[id] = line;
    }
  }
  pipeline::PipelineOptions options;
  options.build.partitions = 3;
  options.parsers = 2;
  options.indexers = 2;
  options.split_bytes = 16 << 10;
  options.spill_dir = path("runs");
  ReadReport read;
  pipeline::build_index({path("docs.jsonl")}, options, path("index"), read);
  const auto partitions = open_all(path("index"));
  size_t found = 0;
  for (const auto& [id, line] : expected) {
    const std::optional<std::string> source = source_of(partitions, id);
    ASSERT_TRUE(source.has_value()) << id;
    EXPECT_EQ(*source, line) << id;
    found += source.has_value();
  }
  EXPECT_EQ(found, read.documents);
  for (const auto& partition : partitions) {
    EXPECT_TRUE(partition->keeps_sources());
    EXPECT_FALSE(partition->find("no such id").has_value());
    EXPECT_FALSE(partition->source(partition->view().meta.doc_end).has_value()) << "a docID outside the partition";
  }
}

TEST_F(StoredDocumentsTest, TrecAndWarcDocumentsAreStoredAsTheirFieldsAndTheInMemoryBuilderAgrees) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<SourceDocument> docs;
  for (int d = 0; d < 60; ++d)
    docs.push_back({"t" + std::to_string(d), "Title " + std::to_string(d), random_text(rng, 1 + rng() % 30), ""});
  testing::write_trec(path("docs.trec"), docs);
  pipeline::PipelineOptions options;
  options.build.partitions = 2;
  options.spill_dir = path("runs");
  ReadReport read;
  pipeline::build_index({path("docs.trec")}, options, path("index"), read);
  const auto partitions = open_all(path("index"));
  ReadReport again;
  for (const SourceDocument& doc : read_documents({path("docs.trec")}, again)) {
    const std::optional<std::string> source = source_of(partitions, doc.external_id);
    ASSERT_TRUE(source.has_value()) << doc.external_id;
    EXPECT_EQ(*source, stored_source(doc));
    EXPECT_EQ(source_field(*source, "id"), doc.external_id);
    EXPECT_EQ(source_field(*source, "title"), doc.title);
    EXPECT_EQ(source_field(*source, "body"), doc.body);
  }
  // The in-memory builder stores the same rows.
  IndexBuilder builder(options.build);
  for (const SourceDocument& doc : read_documents({path("docs.trec")}, again)) builder.add_document(doc);
  write_index(builder.build(), path("reference"));
  for (uint32_t p = 0; p < 2; ++p) {
    EXPECT_EQ(partition_digest(path("index/" + partition_dir_name(p))),
              partition_digest(path("reference/" + partition_dir_name(p))));
  }
}

TEST_F(StoredDocumentsTest, NoStoreKeepsNoSourcesAndChangesNothingElse) {
  std::ofstream(path("docs.jsonl")) << R"({"id":"a","title":"wing","body":"flow over a wing"})"
                                    << "\n"
                                    << R"({"id":"b","body":"shock layer","lang":"en"})"
                                    << "\n";
  pipeline::PipelineOptions options;
  options.spill_dir = path("runs");
  ReadReport read;
  pipeline::build_index({path("docs.jsonl")}, options, path("stored"), read);
  options.build.store = false;
  pipeline::build_index({path("docs.jsonl")}, options, path("bare"), read);
  const auto stored = open_all(path("stored")), bare = open_all(path("bare"));
  EXPECT_TRUE(stored[0]->keeps_sources());
  EXPECT_FALSE(bare[0]->keeps_sources());
  EXPECT_EQ(source_of(stored, "b"), std::string(R"({"id":"b","body":"shock layer","lang":"en"})"));
  EXPECT_FALSE(source_of(bare, "b").has_value());
  std::vector<std::string> with = partition_digest(path("stored/" + partition_dir_name(0)));
  std::vector<std::string> without = partition_digest(path("bare/" + partition_dir_name(0)));
  ASSERT_EQ(with.size(), 6u);  // meta, lexicon, postings, documents, stored, positions
  ASSERT_EQ(without.size(), 6u);
  EXPECT_EQ(with[4].rfind("stored 2 ", 0), 0u) << with[4];
  EXPECT_EQ(without[4], "stored 0 0 0");
  with.erase(with.begin() + 4), without.erase(without.begin() + 4);
  EXPECT_EQ(with, without);
}

TEST(SourceField, ReadsTopLevelStringsAndIntegersOnly) {
  const std::string source = R"({"id":"x","year":1990,"score":1.5,"nested":{"title":"no"},"title":"T\u00e9"})";
  EXPECT_EQ(source_field(source, "id"), "x");
  EXPECT_EQ(source_field(source, "year"), "1990");
  EXPECT_EQ(source_field(source, "title"), "T\xc3\xa9");
  EXPECT_FALSE(source_field(source, "score").has_value());
  EXPECT_FALSE(source_field(source, "nested").has_value());
  EXPECT_FALSE(source_field(source, "absent").has_value());
  EXPECT_FALSE(source_field("not json", "id").has_value());
  EXPECT_FALSE(source_field("[1,2]", "id").has_value());
}

}  // namespace
}  // namespace warp
