#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/util/status.hpp"
#include "indexer/reader/document_reader.hpp"
#include "tests/support/format_writers.hpp"
#include "tests/support/test_data.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

TEST(DocumentReader, SkipsCountsAndNamesMalformedRecords) {
  const fs::path dir = fs::temp_directory_path() / ("warp-reader-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  {
    std::ofstream a(dir / "a.jsonl");
    a << R"({"id":"1","title":"One","body":"first"})"
      << "\n"
      << "\n"
      << R"({"id":"2","body":"no closing brace")"
      << "\n"  // line 3: bad JSON
      << R"(["an","array"])"
      << "\n"  // line 4: not an object
      << R"({"title":"no id"})"
      << "\n"  // line 5: missing id
      << R"({"id":{"x":1}})"
      << "\n"  // line 6: id not a string
      << R"({"id":3,"title":"numeric id","body":"bad \u00e9 )"
      << "\xff"
      << R"("})"
      << "\n"
      << R"({"id":"1","title":"One again","body":"replaces the first"})"
      << "\n";
    std::ofstream b(dir / "sub" / "b.jsonl");
    b << R"({"id":"4","title":"Four","url":"http://four"})"
      << "\n";
    std::ofstream ignored(dir / "notes.txt");
    ignored << "not jsonl\n";
  }
  ReadReport report;
  const auto docs = read_documents({dir.string()}, report);
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
  EXPECT_THROW(read_documents({(dir / "missing.jsonl").string()}, report), Error);
  fs::remove_all(dir);
}

// A line cut short inside a long string (a truncated file): the error names the line and quotes
// only the end of what was read, not the kilobytes of the unterminated string.
TEST(DocumentReader, AnUnterminatedLongStringGivesAShortError) {
  const fs::path dir = fs::temp_directory_path() / ("warp-json-cut-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream a(dir / "a.jsonl");
    a << R"({"id":"ok","body":"kept"})"
      << "\n"
      << R"({"id":"cut","body":")" << std::string(20000, 'y') << "ends here"
      << "\n";
  }
  ReadReport report;
  const auto docs = read_documents({(dir / "a.jsonl").string()}, report);
  ASSERT_EQ(docs.size(), 1u);
  ASSERT_EQ(report.errors.size(), 1u);
  const std::string& error = report.errors[0];
  EXPECT_NE(error.find("a.jsonl:2: malformed JSON"), std::string::npos) << error.substr(0, 200);
  EXPECT_NE(error.find("missing closing quote"), std::string::npos) << error.substr(0, 200);
  EXPECT_NE(error.find("ends here"), std::string::npos) << error.substr(0, 200);
  EXPECT_LT(error.size(), 400u) << error.substr(0, 200);
  fs::remove_all(dir);
}

// JSONL records go through simdjson where it can and nlohmann's SAX parser where it cannot (or
// to name an error): the verdicts of the two must be one. Every edge where they differ in what
// they accept or how they read it: integers past 63 and 64 bits, floats that overflow, repeated
// keys, nulls, nested objects with the same names, lone surrogates, raw control characters,
// trailing text, nesting deeper than simdjson's limit, and lines past the fast path's length.
TEST(DocumentReader, JsonEdgesReadAsBefore) {
  const fs::path dir = fs::temp_directory_path() / ("warp-json-edges-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string deep = std::string(2000, '[') + std::string(2000, ']');
  const std::string long_body(5 << 20, 'x');  // past the fast path's 4 MiB
  {
    std::ofstream a(dir / "a.jsonl");
    a << R"({"id":42,"body":"int id"})"
      << "\n"  // 1
      << R"({"id":18446744073709551615,"body":"uint64 id"})"
      << "\n"  // 2: as int64, -1
      << R"({"id":-7,"body":"negative id"})"
      << "\n"  // 3
      << R"({"id":123456789012345678901234567890,"body":"bigint id"})"
      << "\n"  // 4: a number, not a string
      << R"({"id":1.5,"body":"float id"})"
      << "\n"  // 5
      << R"({"id":"dup","id":"dup2","body":"last key wins"})"
      << "\n"  // 6
      << R"({"id":"n1","title":null,"body":"null title"})"
      << "\n"  // 7
      << R"({"id":"z","nested":{"id":"inner","body":"no"},"body":"outer"})"
      << "\n"  // 8
      << R"({"id":"s1","body":"lone \ud800 surrogate"})"
      << "\n"  // 9: malformed
      << R"({"id":"s2","body":"pair \ud83d\ude00 \u00e9 \n"})"
      << "\n"  // 10
      << R"({"id":"t1","body":"x"} trailing)"
      << "\n"                                       // 11: malformed
      << "{\"id\":\"c1\",\"body\":\"raw\ttab\"}\n"  // 12: malformed
      << R"({"id":"f1","body":1e400})"
      << "\n"  // 13: malformed (overflow)
      << R"({"id":"d1","x":)" << deep << R"(,"body":"deep"})"
      << "\n"  // 14
      << R"({"id":"l1","body":")" << long_body << R"("})"
      << "\n"  // 15
      << R"({"id":"u0","body":"nul \u0000 char"})"
      << "\n";  // 16
  }
  ReadReport report;
  const auto docs = read_documents({(dir / "a.jsonl").string()}, report);
  std::map<std::string, const SourceDocument*> by_id;
  for (const SourceDocument& d : docs) by_id[d.external_id] = &d;
  for (const char* id : {"42", "-1", "-7", "dup2", "n1", "z", "s2", "d1", "l1", "u0"})
    EXPECT_TRUE(by_id.count(id)) << id;
  ASSERT_EQ(docs.size(), 10u);
  EXPECT_EQ(by_id.at("z")->body, "outer");
  EXPECT_EQ(by_id.at("n1")->title, "");
  EXPECT_EQ(by_id.at("s2")->body, "pair \xF0\x9F\x98\x80 \xC3\xA9 \n");
  EXPECT_EQ(by_id.at("l1")->body.size(), long_body.size());
  EXPECT_EQ(by_id.at("u0")->body, std::string("nul \0 char", 10));
  ASSERT_EQ(report.errors.size(), 6u);
  const char* expected[6][2] = {{"a.jsonl:4:", "\"id\" is not a string"}, {"a.jsonl:5:", "\"id\" is not a string"},
                                {"a.jsonl:9:", "malformed JSON"},         {"a.jsonl:11:", "malformed JSON"},
                                {"a.jsonl:12:", "malformed JSON"},        {"a.jsonl:13:", "malformed JSON"}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NE(report.errors[i].find(expected[i][0]), std::string::npos) << report.errors[i];
    EXPECT_NE(report.errors[i].find(expected[i][1]), std::string::npos) << report.errors[i];
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace warp

namespace warp {
namespace {

class FormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-formats-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(FormatTest, TrecRecordsAndTheirErrors) {
  {
    std::ofstream out(path("a.trec"));
    out << "<DOC>\n<DOCNO> FT-1 </DOCNO>\n<HEADLINE>Wings &amp; flaps</HEADLINE>\n<TEXT>\nLift at <b>low</b> "
           "speed.\n</TEXT>\n</DOC>\n"
        << "<DOC>\n<TEXT>no docno here</TEXT>\n</DOC>\n"  // lines 8-10: no DOCNO
        << "stray text\n"                                 // line 11: outside a DOC
        << "<DOC>\n<DOCNO>FT-2</DOCNO>\n<TITLE>Second</TITLE>\nbody two\n</DOC>\n"
        << "<DOC>\n<DOCNO>FT-3</DOCNO>\nnever closed\n";  // line 17: unterminated
  }
  ReadReport report;
  const auto docs = read_documents({path("a.trec")}, report);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].external_id, "FT-1");
  EXPECT_EQ(docs[0].title, "Wings & flaps");
  EXPECT_EQ(docs[0].body, "Lift at low speed.");
  EXPECT_EQ(docs[1].external_id, "FT-2");
  EXPECT_EQ(docs[1].title, "Second");
  EXPECT_EQ(docs[1].body, "body two");
  ASSERT_EQ(report.rejected, 3u);
  EXPECT_NE(report.errors[0].find("a.trec:8: document without <DOCNO>"), std::string::npos) << report.errors[0];
  EXPECT_NE(report.errors[1].find("a.trec:11: text outside"), std::string::npos) << report.errors[1];
  EXPECT_NE(report.errors[2].find("a.trec:17: <DOC> without </DOC>"), std::string::npos) << report.errors[2];
}

// A document on one line, as some TREC files hold them: it ends on the line it begins, whether it
// follows a closed document, a broken one or stray text; and the split reader (a large file read
// in parallel) agrees with the whole-file reader.
TEST_F(FormatTest, TrecDocumentsOnOneLine) {
  {
    std::ofstream out(path("b.trec"));
    out << "<DOC><DOCNO>L-1</DOCNO><TITLE>One</TITLE><TEXT>first line doc</TEXT></DOC>\n"  // 1
        << "<DOC>\n<DOCNO>L-2</DOCNO>\nbody two\n</DOC>\n"                                 // 2-5
        << "<DOC>\n<DOCNO>L-3</DOCNO>\nnever closed\n"                                     // 6-8: broken
        << "<DOC><DOCNO>L-4</DOCNO>after a broken one</DOC>\n"                             // 9
        << "stray\n"                                                                       // 10
        << "<DOC><DOCNO>L-5</DOCNO>after stray text</DOC>\n";                              // 11
  }
  ReadReport report;
  const auto docs = read_documents({path("b.trec")}, report);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].external_id, "L-1");
  EXPECT_EQ(docs[0].title, "One");
  EXPECT_EQ(docs[0].body, "first line doc");
  EXPECT_EQ(docs[1].external_id, "L-2");
  EXPECT_EQ(docs[2].external_id, "L-4");
  EXPECT_EQ(docs[2].body, "after a broken one");
  EXPECT_EQ(docs[3].external_id, "L-5");
  ASSERT_EQ(report.rejected, 2u);
  EXPECT_NE(report.errors[0].find("b.trec:6: <DOC> without </DOC>"), std::string::npos) << report.errors[0];
  EXPECT_NE(report.errors[1].find("b.trec:10: text outside"), std::string::npos) << report.errors[1];
  // Read in splits of a few bytes, as the parallel pipeline reads it: the same documents.
  std::vector<std::string> ids;
  for (const InputSplit& split : plan_splits({path("b.trec")}, 40)) {
    SplitReader reader(split);
    for (SourceDocument doc; reader.next(doc);) ids.push_back(doc.external_id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"L-1", "L-2", "L-4", "L-5"}));
}

// A directory's gzipped JSONL and TREC files are read with the rest (they had been passed over).
TEST_F(FormatTest, GzippedFilesInADirectoryAreRead) {
  const auto gzip_to = [&](const std::string& name, const std::string& text) {
    gzFile out = gzopen(path(name).c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
    gzclose(out);
  };
  gzip_to("a.jsonl.gz", "{\"id\":\"gz-json\",\"body\":\"zipped\"}\n");
  gzip_to("b.trec.gz", "<DOC>\n<DOCNO>gz-trec</DOCNO>\nzipped too\n</DOC>\n");
  std::ofstream(path("notes.txt")) << "not an input\n";
  const auto files = expand_input_paths({dir_.string()});
  ASSERT_EQ(files.size(), 2u);
  ReadReport report;
  const auto docs = read_documents({dir_.string()}, report);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].external_id, "gz-json");
  EXPECT_EQ(docs[1].external_id, "gz-trec");
  EXPECT_EQ(report.rejected, 0u);
}

TEST_F(FormatTest, WarcRecordsPlainAndGzipAndTheirErrors) {
  const std::vector<SourceDocument> docs = {{"clueweb-1", "First page", "alpha beta", ""},
                                            {"clueweb-2", "Second page", "gamma &delta", ""}};
  for (bool gzip : {false, true}) {
    const std::string file = path(gzip ? "a.warc.gz" : "a.warc");
    testing::write_warc(file, docs, gzip);
    ReadReport report;
    const auto read = read_documents({file}, report);
    ASSERT_EQ(read.size(), 2u) << file;
    EXPECT_EQ(read[0].external_id, "clueweb-1");
    EXPECT_EQ(read[0].title, "First page");
    EXPECT_EQ(read[0].body, "alpha beta");
    EXPECT_EQ(read[0].url, "http://example.org/clueweb-1");
    EXPECT_EQ(read[1].body, "gamma &delta");
    EXPECT_EQ(report.rejected, 0u);
  }
  // A record with a bad Content-Length, then one truncated at the end of the file.
  const std::string good = testing::warc_response(docs[0]);
  std::string bad = testing::warc_response(docs[1]);
  bad.replace(bad.find("Content-Length: "), 17, "Content-Length: x");
  const std::string truncated = testing::warc_response({"clueweb-3", "t", "cut short", ""}).substr(0, 300);
  {
    std::ofstream out(path("broken.warc"), std::ios::binary);
    out << good << bad << good << truncated;
  }
  ReadReport report;
  const auto read = read_documents({path("broken.warc")}, report);
  EXPECT_EQ(read.size(), 1u);  // the good record twice: the same id, the last one wins
  EXPECT_EQ(report.replaced, 1u);
  ASSERT_EQ(report.rejected, 2u);
  EXPECT_NE(report.errors[0].find("broken.warc@" + std::to_string(good.size()) +
                                  ": WARC record without a valid Content-Length"),
            std::string::npos)
      << report.errors[0];
  EXPECT_NE(report.errors[1].find("truncated"), std::string::npos) << report.errors[1];
}

TEST_F(FormatTest, CranfieldInAllThreeFormatsIndexesIdentically) {
  ReadReport report;
  const auto docs = read_documents({testing::test_data_dir() + "/cranfield/docs.jsonl"}, report);
  ASSERT_EQ(docs.size(), 1400u);
  testing::write_trec(path("cran.trec"), docs);
  testing::write_warc(path("cran.warc.gz"), docs, true);
  const auto build = [](const std::vector<SourceDocument>& input) {
    IndexBuilder builder({});
    for (const auto& d : input) builder.add_document(d);
    return builder.build();
  };
  const auto expected = build(docs);
  for (const std::string& file : {path("cran.trec"), path("cran.warc.gz")}) {
    ReadReport r;
    const auto other_docs = read_documents({file}, r);
    ASSERT_EQ(other_docs.size(), 1400u) << file;
    EXPECT_EQ(r.rejected, 0u) << file;
    const auto actual = build(other_docs);
    EXPECT_EQ(actual[0].view.doc_lengths, expected[0].view.doc_lengths) << file;
    EXPECT_EQ(actual[0].view.lexicon.size(), expected[0].view.lexicon.size()) << file;
    EXPECT_EQ(actual[0].view.postings, expected[0].view.postings) << file;
    EXPECT_EQ(actual[0].view.external_ids, expected[0].view.external_ids) << file;
  }
}

}  // namespace
}  // namespace warp
