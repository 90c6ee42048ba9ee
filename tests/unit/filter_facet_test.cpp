// Columns, filters and facets (docs/api.md#filters-and-facets): the columns read from documents'
// JSON and kept in partitions (the in-memory builder and the pipeline alike), the filter syntax,
// and filtered searches and facet counts against references that read the documents' fields
// themselves, on random collections (the seed printed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "common/index/index_files.hpp"
#include "indexer/reader/document_reader.hpp"
#include "common/index/partition_digest.hpp"
#include "common/index/partition_store.hpp"
#include "common/query/filter.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "leaf/query/facet_counts.hpp"
#include "tests/support/both_builds.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/in_memory_index.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

TEST(ColumnSchema, NamesAreCheckedWhenDeclared) {
  const ColumnSchema schema = parse_column_schema("lang,tags", "year");
  EXPECT_EQ(schema.keyword, (std::vector<std::string>{"lang", "tags"}));
  EXPECT_EQ(schema.numeric, (std::vector<std::string>{"year"}));
  EXPECT_TRUE(parse_column_schema("", "").empty());
  EXPECT_THROW(parse_column_schema("lang,", ""), Error);     // an empty name
  EXPECT_THROW(parse_column_schema("la ng", ""), Error);     // not a plain name
  EXPECT_THROW(parse_column_schema("title", ""), Error);     // a text field
  EXPECT_THROW(parse_column_schema("year", "year"), Error);  // twice
  EXPECT_THROW(parse_column_schema(std::string(65, 'a'), ""), Error);
}

TEST(DocColumns, ReadFromJsonAndKeptByteForByte) {
  ColumnsBuilder builder(parse_column_schema("lang,tags", "year"));
  builder.add(R"({"id":"a","lang":"en","tags":["x","y","x",{"no":1},7,true],"year":1999})");
  builder.add(R"({"id":"b","lang":["fr","en"],"year":"1999"})");  // a string is not a number
  builder.add("not json");
  builder.add("");
  builder.add(R"({"id":"e","lang":null,"tags":"y","year":-2.5})");
  const DocColumns columns = builder.build();
  ASSERT_EQ(columns.doc_count, 5u);
  const KeywordColumn* lang = columns.keyword_field("lang");
  const KeywordColumn* tags = columns.keyword_field("tags");
  const NumericColumn* year = columns.numeric_field("year");
  ASSERT_TRUE(lang && tags && year);
  EXPECT_EQ(lang->values, (std::vector<std::string>{"en", "fr"}));
  EXPECT_EQ(tags->values, (std::vector<std::string>{"7", "true", "x", "y"}));
  EXPECT_EQ(std::vector<uint32_t>(tags->values_of(0).begin(), tags->values_of(0).end()),
            (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(lang->values_of(1).size(), 2u);
  EXPECT_TRUE(lang->values_of(2).empty() && lang->values_of(3).empty() && lang->values_of(4).empty());
  const std::span<const uint32_t> english = lang->docs_of(*lang->find("en"));
  EXPECT_EQ(std::vector<uint32_t>(english.begin(), english.end()), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(year->values[0], 1999);
  EXPECT_TRUE(std::isnan(year->values[1]) && std::isnan(year->values[2]));
  EXPECT_EQ(year->values[4], -2.5);

  const std::string bytes = columns.serialize();
  const DocColumns back = DocColumns::parse(bytes, 5);
  EXPECT_EQ(back.serialize(), bytes);
  EXPECT_EQ(back.keyword_field("tags")->value_docs, tags->value_docs);
  EXPECT_THROW(DocColumns::parse(bytes, 6), Error);  // another partition's
  for (size_t at : {size_t{0}, size_t{9}, bytes.size() / 2, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x20);
    EXPECT_THROW(DocColumns::parse(damaged, 5), Error) << "byte " << at;
  }
  EXPECT_THROW(DocColumns::parse(bytes.substr(0, bytes.size() - 7), 5), Error);
}

TEST(FilterSyntax, ParsesWhatItDocumentsAndReadsItsOwnTextBack) {
  for (const char* text :
       {"lang:en", "lang:\"en GB\"", "year>=1990", "year<2000.5", "year=3", "year:1990", "lang:en AND year>1990",
        "lang:en OR lang:fr AND NOT year<=1900", "(lang:en OR lang:fr) AND NOT tag:\"a \\\"quoted\\\" \\\\ value\"",
        "NOT NOT x:y", "  a:b   OR   (c:d)  ", "year>=-1e3"}) {
    const FilterNode parsed = parse_filter(text);
    const std::string canonical = filter_text(parsed);
    EXPECT_EQ(filter_text(parse_filter(canonical)), canonical) << text;
  }
  const FilterNode precedence = parse_filter("a:1 OR b:2 AND c:3");
  ASSERT_EQ(precedence.kind, FilterNode::Kind::kOr);
  EXPECT_EQ(precedence.children[1].kind, FilterNode::Kind::kAnd);
  EXPECT_EQ(parse_filter("tag:\"a \\\"q\\\"\"").value, "a \"q\"");
}

TEST(FilterSyntax, RefusesWhatItCannotParseWithTheColumn) {
  const auto message = [](const std::string& text) {
    try {
      parse_filter(text);
    } catch (const FilterError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  EXPECT_EQ(message(""), "filter, column 1: the filter is empty");
  EXPECT_EQ(message("(lang:en"), "filter, column 1: the parenthesis opened here is never closed");
  EXPECT_EQ(message("lang:en)"), "filter, column 8: a ')' closes nothing");
  EXPECT_EQ(message("lang:"), "filter, column 6: a value is missing here (quote an empty one: \"\")");
  EXPECT_EQ(message("year>=abc"), "filter, column 7: 'abc' is not a number");
  EXPECT_EQ(message("lang en"), "filter, column 5: after the field 'lang' comes ':' or a comparison (>= > <= < =)");
  EXPECT_EQ(message("lang:\"en"), "filter, column 6: the quote opened here is never closed");
  EXPECT_EQ(message("lang:en fr:x"), "filter, column 9: expected AND, OR or the end here");
  EXPECT_EQ(message("lang:en AND"), "filter, column 12: a test (field:value or field>=number) is missing at the end");
  std::string many = "a:1";
  for (size_t i = 1; i <= kMaxFilterTests; ++i) many += " OR a:" + std::to_string(i);
  EXPECT_NE(message(many).find("more than 64 tests"), std::string::npos);
  EXPECT_NE(message(std::string(40, '(') + "a:1" + std::string(40, ')')).find("nested more than 32"),
            std::string::npos);
  EXPECT_EQ(message("year>=1e999"), "filter, column 7: '1e999' is not a number");

  const ColumnSchema schema = parse_column_schema("lang", "year");
  EXPECT_NO_THROW(check_filter(parse_filter("lang:en AND year>1 AND year:2"), schema));
  EXPECT_THROW(check_filter(parse_filter("colour:red"), schema), FilterError);
  EXPECT_THROW(check_filter(parse_filter("lang>=1"), schema), FilterError);
  EXPECT_THROW(check_filter(parse_filter("year:nineteen"), schema), FilterError);
  EXPECT_THROW(check_filter(parse_filter("NOT (lang:en OR colour:red)"), schema), FilterError);
}

// A document's fields as the test writes them, and the filter read over them directly.
struct Fields {
  std::optional<std::string> lang;
  std::vector<std::string> tags;
  std::optional<double> year;
  std::string json(const std::string& id) const {
    nlohmann::json doc = {{"id", id}};
    if (lang) doc["lang"] = *lang;
    if (!tags.empty()) doc["tags"] = tags;
    if (year) {
      doc["year"] = *year;
    } else if (id.size() % 3 == 0) {
      doc["year"] = "unknown";  // not a number: no value
    }
    return doc.dump();
  }
};

bool reference_allows(const FilterNode& filter, const Fields& doc) {
  switch (filter.kind) {
    case FilterNode::Kind::kAnd:
      return std::all_of(filter.children.begin(), filter.children.end(),
                         [&](const FilterNode& c) { return reference_allows(c, doc); });
    case FilterNode::Kind::kOr:
      return std::any_of(filter.children.begin(), filter.children.end(),
                         [&](const FilterNode& c) { return reference_allows(c, doc); });
    case FilterNode::Kind::kNot:
      return !reference_allows(filter.children[0], doc);
    case FilterNode::Kind::kEquals:
      if (filter.field == "lang") return doc.lang == filter.value;
      if (filter.field == "tags") return std::count(doc.tags.begin(), doc.tags.end(), filter.value) > 0;
      return doc.year && std::stod(filter.value) == *doc.year;
    case FilterNode::Kind::kCompare:
      if (!doc.year) return false;
      switch (filter.op) {
        case FilterNode::Op::kLess:
          return *doc.year < filter.number;
        case FilterNode::Op::kLessEqual:
          return *doc.year <= filter.number;
        case FilterNode::Op::kGreater:
          return *doc.year > filter.number;
        case FilterNode::Op::kGreaterEqual:
          return *doc.year >= filter.number;
        case FilterNode::Op::kEqual:
          return *doc.year == filter.number;
      }
  }
  return false;
}

std::string random_filter(std::mt19937_64& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, depth > 0 ? 6 : 3);
  const auto number = [&] { return std::to_string(std::uniform_int_distribution<int>(1975, 2025)(rng)); };
  const char* langs[] = {"en", "fr", "de", "zz"};
  switch (pick(rng)) {
    case 0:
      return std::string("lang:") + langs[rng() % 4];
    case 1:
      return "tags:t" + std::to_string(rng() % 6);
    case 2:
      return std::string("year") + std::vector<const char*>{">=", ">", "<=", "<", "="}[rng() % 5] + number();
    case 3:
      return "year:" + number();
    case 4:
      return "NOT " + random_filter(rng, depth - 1);
    case 5:
      return "(" + random_filter(rng, depth - 1) + " OR " + random_filter(rng, depth - 1) + ")";
    default:
      return random_filter(rng, depth - 1) + " AND " + random_filter(rng, depth - 1);
  }
}

struct Collection {
  std::vector<Fields> fields;
  std::vector<std::vector<std::string>> terms;
  testing::BruteForceIndex reference;
  std::vector<BuiltPartition> built;
};

Collection random_collection(std::mt19937_64& rng, uint32_t partitions) {
  Collection c;
  BuildOptions options;
  options.partitions = partitions;
  options.columns = parse_column_schema("lang,tags", "year");
  IndexBuilder builder(options);
  const size_t documents = std::uniform_int_distribution<size_t>(1500, 4000)(rng);
  const uint32_t vocabulary = std::uniform_int_distribution<uint32_t>(20, 200)(rng);
  for (size_t d = 0; d < documents; ++d) {
    Fields f;
    if (rng() % 5) f.lang = std::vector<std::string>{"en", "fr", "de"}[rng() % 3];
    for (int t = 0; t < 6; ++t)
      if (rng() % 4 == 0) f.tags.push_back("t" + std::to_string(t));
    if (rng() % 6) f.year = static_cast<double>(std::uniform_int_distribution<int>(1980, 2020)(rng));
    std::vector<std::string> terms(std::uniform_int_distribution<size_t>(1, 30)(rng));
    std::geometric_distribution<uint32_t> zipfish(0.08);
    for (std::string& term : terms) term = "t" + std::to_string(std::min(zipfish(rng), vocabulary));
    const std::string id = "d" + std::to_string(d);
    builder.add_analyzed({id, "", "", 0, f.json(id)}, terms);
    c.reference.add(terms);
    c.fields.push_back(std::move(f));
    c.terms.push_back(std::move(terms));
  }
  c.built = builder.build();
  return c;
}

// Filtered searches in every mode and OR algorithm are the brute-force top k of the documents the
// filter (and the query's constraints) allow; facet counts are the reference's over the documents
// the query matches.
TEST(FilteredQueries, MatchTheReferenceOnRandomCollections) {
  for (uint32_t partitions : {1u, 3u}) {
    const uint64_t seed = testing::test_seed() + 211 + partitions;
    std::mt19937_64 rng(seed);
    Collection c = random_collection(rng, partitions);
    c.reference.filter_allows = [&](const FilterNode& filter, DocId doc) {
      return reference_allows(filter, c.fields[doc]);
    };
    const auto term = [&] { return "t" + std::to_string(std::geometric_distribution<uint32_t>(0.1)(rng)); };
    for (OrAlgorithm algorithm : {OrAlgorithm::kTiles, OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand}) {
      const testing::InMemoryIndex index(c.built, algorithm);
      for (int q = 0; q < 60; ++q) {
        Query query({}, QueryMode::kOr, std::vector<size_t>{1, 10, 100}[q % 3]);
        for (int i = std::uniform_int_distribution<int>(1, 4)(rng); i > 0; --i) query.terms.push_back(term());
        if (q % 4 == 1) query.required.push_back(query.terms[0]);
        if (q % 5 == 2) query.excluded.push_back({term()});
        const std::string text = random_filter(rng, 3);
        query.filter = std::make_shared<const FilterNode>(parse_filter(text));
        for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd, QueryMode::kAndOr}) {
          query.mode = mode;
          ASSERT_TRUE(testing::same_topk(c.reference.search(query), index.search(query), c.reference, query.terms))
              << "filter " << text << " query " << q << " mode " << to_string(mode) << " algorithm "
              << or_algorithm_name(algorithm) << " partitions " << partitions << " seed " << seed;
        }
        if (algorithm != OrAlgorithm::kTiles) continue;
        for (bool any_term : {true, false}) {
          FacetCounter counter({"lang", "tags", "year", "absent"}, UINT64_MAX);
          for (const BuiltPartition& p : c.built) counter.count(query, any_term, p.view, {});
          const FacetResult result = counter.take(1000);
          std::map<std::string, uint64_t> lang, tags, year;
          uint64_t matches = 0;
          const std::set<std::string> wanted(query.terms.begin(), query.terms.end());
          for (DocId d = 0; d < c.fields.size(); ++d) {
            const std::set<std::string> held(c.terms[d].begin(), c.terms[d].end());
            const size_t hits =
                std::count_if(wanted.begin(), wanted.end(), [&](const auto& t) { return held.count(t); });
            if ((any_term ? hits == 0 : hits < wanted.size()) || !c.reference.allowed(query, d)) continue;
            ++matches;
            const Fields& f = c.fields[d];
            if (f.lang) ++lang[*f.lang];
            for (const std::string& tag : f.tags) ++tags[tag];
            if (f.year) ++year[std::to_string(static_cast<int>(*f.year))];
          }
          ASSERT_EQ(result.matches, matches) << text << " seed " << seed;
          ASSERT_EQ(result.fields.size(), 4u);
          const auto as_map = [](const FacetField& field) {
            std::map<std::string, uint64_t> out;
            for (const FacetValue& v : field.values) out[v.value] = v.count;
            return out;
          };
          EXPECT_EQ(as_map(result.fields[0]), lang) << text << " seed " << seed;
          EXPECT_EQ(as_map(result.fields[1]), tags) << text << " seed " << seed;
          EXPECT_EQ(as_map(result.fields[2]), year) << text << " seed " << seed;
          EXPECT_TRUE(result.fields[3].values.empty());
          for (size_t i = 1; i < result.fields[2].values.size(); ++i)  // most frequent first
            EXPECT_GE(result.fields[2].values[i - 1].count, result.fields[2].values[i].count);
        }
      }
    }
  }
}

TEST(Facets, ListTheMostFrequentAndBoundTheirPass) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  Collection c = random_collection(rng, 1);
  Query query({"t0", "t1"}, QueryMode::kOr, 10);
  FacetCounter all({"year"}, UINT64_MAX);
  all.count(query, true, c.built[0].view, {});
  const FacetResult every = all.take(1000);
  FacetCounter top({"year"}, UINT64_MAX);
  top.count(query, true, c.built[0].view, {});
  const FacetResult three = top.take(3);
  ASSERT_EQ(three.fields[0].values.size(), 3u);
  uint64_t rest = 0;
  for (size_t i = 3; i < every.fields[0].values.size(); ++i) rest += every.fields[0].values[i].count;
  EXPECT_EQ(three.fields[0].others, rest);
  EXPECT_EQ(three.fields[0].other_values, every.fields[0].values.size() - 3);
  // Deleted documents are not counted.
  std::vector<uint8_t> deleted(c.built[0].view.doc_count(), 1);
  FacetCounter none({"year"}, UINT64_MAX);
  none.count(query, true, c.built[0].view, deleted);
  EXPECT_EQ(none.take(10).matches, 0u);
  // Past the bound: not counted, and said.
  FacetCounter bounded({"year"}, 10);
  bounded.count(query, true, c.built[0].view, {});
  const FacetResult refused = bounded.take(10);
  EXPECT_NE(refused.error.find("--max-facet-postings"), std::string::npos);
  EXPECT_TRUE(refused.fields.empty());
}

// Filters asked again are answered from the cache: the same bits, a hit counted; other columns or
// another filter are not confused with them; past its budget the least recently used go.
TEST(FilterCache, KeepsWhatWasAskedAgainWithinItsBudget) {
  std::mt19937_64 rng(testing::test_seed() + 29);
  const Collection a = random_collection(rng, 1), b = random_collection(rng, 1);
  const DocColumns* ca = a.built[0].view.columns.get();
  const DocColumns* cb = b.built[0].view.columns.get();
  const uint32_t na = a.built[0].view.doc_count(), nb = b.built[0].view.doc_count();
  set_filter_cache_bytes(size_t{1} << 20);
  const FilterNode year = parse_filter("year>=2000"), lang = parse_filter("lang:en");
  const FilterCacheStats before = filter_cache_stats();
  const auto first = cached_filter_bits(year, ca, na);
  EXPECT_EQ(*first, filter_bits(year, ca, na));
  EXPECT_EQ(cached_filter_bits(year, ca, na), first);  // the same bits, not computed again
  EXPECT_EQ(*cached_filter_bits(year, cb, nb), filter_bits(year, cb, nb));
  EXPECT_EQ(*cached_filter_bits(lang, ca, na), filter_bits(lang, ca, na));
  const FilterCacheStats after = filter_cache_stats();
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_EQ(after.misses - before.misses, 3u);
  set_filter_cache_bytes((na + 63) / 64 * 8);  // room for one of a's
  EXPECT_EQ(filter_cache_stats().entries, 1u);
  EXPECT_EQ(*cached_filter_bits(year, ca, na), filter_bits(year, ca, na));
  set_filter_cache_bytes(size_t{256} << 20);
}

// Columns are kept in the partitions: the pipeline writes the in-memory builder's rows (with and
// without stored documents), and a partition opened from disk filters as the one built in memory.
TEST(ColumnsOnDisk, ThePipelineWritesTheBuildersColumnsAndTheyOpen) {
  const fs::path dir = fs::temp_directory_path() / ("warp-columns-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937_64 rng(testing::test_seed() + 17);
  {
    std::ofstream out(dir / "docs.jsonl");
    for (int d = 0; d < 3000; ++d) {
      Fields f;
      if (rng() % 4) f.lang = std::vector<std::string>{"en", "fr"}[rng() % 2];
      if (rng() % 3) f.year = static_cast<double>(1990 + rng() % 30);
      nlohmann::json doc = nlohmann::json::parse(f.json("d" + std::to_string(d)));
      doc["title"] = "title " + std::to_string(rng() % 50);
      doc["body"] = "body w" + std::to_string(rng() % 200) + " w" + std::to_string(rng() % 20);
      out << doc.dump() << "\n";
    }
    out << "{broken\n";
  }
  const std::string input = (dir / "docs.jsonl").string();
  for (bool store : {true, false}) {
    BuildOptions build;
    build.partitions = 3;
    build.store = store;
    build.columns = parse_column_schema("lang,tags", "year");
    const testing::BothBuilds both = testing::build_both_ways(input, build, dir, std::to_string(store));
    const std::vector<BuiltPartition>& built = both.built;
    const fs::path &reference = both.reference, &piped = both.piped;
    for (uint32_t p = 0; p < 3; ++p) {
      const std::string name = partition_dir_name(p);
      EXPECT_EQ(partition_digest((piped / name).string()), partition_digest((reference / name).string()))
          << name << " store " << store;
      const auto opened = open_partition((piped / name).string());
      ASSERT_TRUE(opened->view().columns) << name;
      EXPECT_EQ(opened->view().columns->serialize(), built[p].view.columns->serialize()) << name;
      const FilterNode filter = parse_filter("lang:en AND year>=2000");
      EXPECT_EQ(filter_bits(filter, opened->view().columns.get(), opened->view().doc_count()),
                filter_bits(filter, built[p].view.columns.get(), built[p].view.doc_count()));
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace warp
