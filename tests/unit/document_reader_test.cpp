#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/util/status.hpp"
#include "indexer/document_reader.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

TEST(DocumentReader, SkipsCountsAndNamesMalformedRecords) {
  const fs::path dir = fs::temp_directory_path() / ("warp-reader-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  {
    std::ofstream a(dir / "a.jsonl");
    a << R"({"id":"1","title":"One","body":"first"})" << "\n"
      << "\n"
      << R"({"id":"2","body":"no closing brace")" << "\n"          // line 3: bad JSON
      << R"(["an","array"])" << "\n"                                // line 4: not an object
      << R"({"title":"no id"})" << "\n"                              // line 5: missing id
      << R"({"id":{"x":1}})" << "\n"                                 // line 6: id not a string
      << R"({"id":3,"title":"numeric id","body":"bad \u00e9 )" << "\xff" << R"("})" << "\n"
      << R"({"id":"1","title":"One again","body":"replaces the first"})" << "\n";
    std::ofstream b(dir / "sub" / "b.jsonl");
    b << R"({"id":"4","title":"Four","url":"http://four"})" << "\n";
    std::ofstream ignored(dir / "notes.txt");
    ignored << "not jsonl\n";
  }
  ReadReport report;
  const auto docs = read_jsonl_documents({dir.string()}, report);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(report.documents, 3u);
  EXPECT_EQ(report.rejected, 4u);
  EXPECT_EQ(report.replaced, 1u);
  ASSERT_EQ(report.errors.size(), 4u);
  EXPECT_NE(report.errors[0].find("a.jsonl:3:"), std::string::npos) << report.errors[0];
  EXPECT_NE(report.errors[1].find("a.jsonl:4: not a JSON object"), std::string::npos) << report.errors[1];
  EXPECT_NE(report.errors[2].find("a.jsonl:5: missing \"id\""), std::string::npos) << report.errors[2];
  EXPECT_NE(report.errors[3].find("a.jsonl:6:"), std::string::npos) << report.errors[3];
  EXPECT_EQ(docs[0].external_id, "3");
  EXPECT_EQ(docs[0].body, "bad \xc3\xa9 \xEF\xBF\xBD");  // invalid UTF-8 replaced, not dropped
  EXPECT_EQ(docs[1].external_id, "1");
  EXPECT_EQ(docs[1].title, "One again");
  EXPECT_EQ(docs[2].url, "http://four");
  EXPECT_THROW(read_jsonl_documents({(dir / "missing.jsonl").string()}, report), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace warp
