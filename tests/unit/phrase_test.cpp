// Word positions and phrases (docs/api.md#query-syntax): the position rows' codec round trip and
// its refusals, phrase matching against a reference that reads the documents' words itself, phrased
// searches against brute-force BM25 in every mode and OR algorithm, and the positions of the
// in-memory builder, the pipeline and a partition on disk the same (random collections, the seed
// printed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "common/index/index_files.hpp"
#include "common/index/partition_digest.hpp"
#include "common/index/partition_store.hpp"
#include "common/query/query_syntax.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/reader/document_reader.hpp"
#include "leaf/query/phrase_docs.hpp"
#include "tests/support/both_builds.hpp"
#include "tests/support/brute_force.hpp"
#include "tests/support/in_memory_index.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/topk_match.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

struct RandomRow {
  DocId chunk = 0;
  std::vector<DocId> docs;
  std::vector<uint32_t> starts{0};
  std::vector<uint32_t> positions;
};

RandomRow random_row(std::mt19937_64& rng) {
  RandomRow row;
  row.chunk = static_cast<DocId>(rng() % 3 == 0 ? 0 : rng() % 100000);
  const size_t n = std::vector<size_t>{1, 5, 127, 128, 129, 700}[rng() % 6];
  DocId doc = row.chunk + static_cast<DocId>(rng() % 3);
  for (size_t i = 0; i < n; ++i) {
    row.docs.push_back(doc);
    doc += 1 + static_cast<DocId>(rng() % 2 == 0 ? 0 : rng() % (rng() % 5 == 0 ? 100000 : 20));
    const uint32_t tf = 1 + static_cast<uint32_t>(rng() % 4 == 0 ? rng() % 300 : rng() % 3);
    uint64_t position = rng() % 8 == 0 ? rng() % 4000000000u : rng() % 50;
    for (uint32_t j = 0; j < tf && position < UINT32_MAX; ++j) {
      row.positions.push_back(static_cast<uint32_t>(position));
      position += 1 + (rng() % 5 == 0 ? rng() % 100000 : rng() % 9);
    }
    row.starts.push_back(static_cast<uint32_t>(row.positions.size()));
  }
  return row;
}

TEST(WordPositions, RowsRoundTripAndDamagedOnesAreRefused) {
  std::mt19937_64 rng(testing::test_seed() + 3);
  int refused = 0;
  for (int round = 0; round < 200; ++round) {
    const RandomRow row = random_row(rng);
    const std::string encoded = encode_term_positions(row.chunk, row.docs, row.starts, row.positions);
    const TermPositionsRow parsed = TermPositionsRow::parse(encoded, row.chunk);
    ASSERT_EQ(parsed.doc_count(), row.docs.size());
    ASSERT_EQ(parsed.position_count(), row.positions.size());
    RandomRow back{row.chunk, {}, {0}, {}};
    PositionBlock block;
    for (size_t b = 0; b < parsed.blocks(); ++b) {
      parsed.decode(b, block);
      ASSERT_EQ(parsed.last_doc(b), block.docs.back());
      for (size_t i = 0; i < block.docs.size(); ++i) {
        back.docs.push_back(block.docs[i]);
        for (uint32_t p : block.of(i)) back.positions.push_back(p);
        back.starts.push_back(static_cast<uint32_t>(back.positions.size()));
      }
    }
    ASSERT_EQ(back.docs, row.docs) << "round " << round;
    ASSERT_EQ(back.starts, row.starts) << "round " << round;
    ASSERT_EQ(back.positions, row.positions) << "round " << round;

    // Damage: cut, a ragged length, or a flipped bit. Refused with Error or read as other values;
    // never read past the row (the sanitized build checks that).
    std::string damaged = encoded;
    switch (round % 3) {
      case 0:
        damaged.resize(damaged.size() - 4 * (1 + rng() % (damaged.size() / 4)));
        break;
      case 1:
        damaged.pop_back();
        break;
      default:
        damaged[rng() % damaged.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    try {
      const TermPositionsRow read = TermPositionsRow::parse(damaged, row.chunk);
      for (size_t b = 0; b < read.blocks(); ++b) {
        read.decode(b, block);
        for (size_t i = 0; i < block.docs.size(); ++i) block.of(i);
      }
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GE(refused, 133);  // every cut and ragged row at least
}

TEST(WordPositions, ChunksAndTheirMetaRow) {
  EXPECT_EQ(position_chunk_begins(5, {}), (std::vector<DocId>{5}));
  std::vector<uint32_t> lengths(kPositionChunkDocs, 3);
  EXPECT_EQ(position_chunk_begins(10, lengths), (std::vector<DocId>{10}));
  lengths.push_back(0);
  EXPECT_EQ(position_chunk_begins(10, lengths), (std::vector<DocId>{10, 10 + kPositionChunkDocs}));
  // By positions: a long document closes the chunk before it; one longer than a chunk is one alone.
  const std::vector<uint32_t> long_ones = {5, kPositionChunkPositions - 5, 1, kPositionChunkPositions + 9, 0, 2};
  EXPECT_EQ(position_chunk_begins(0, long_ones), (std::vector<DocId>{0, 2, 3, 4}));
  EXPECT_EQ(parse_position_chunks(position_chunks_text({0, 16384, 32768})), (std::vector<DocId>{0, 16384, 32768}));
  for (const char* bad : {"", "1 1", "3 2", "x", "1 -2", "99999999999"})
    EXPECT_THROW(parse_position_chunks(bad), Error) << bad;
}

// A random collection of words from a small vocabulary (so phrases recur), stop words among them.
struct PhraseCollection {
  std::vector<std::vector<std::string>> titles, bodies;  // analyzed, by docID
  std::vector<BuiltPartition> built;
  testing::BruteForceIndex reference;
  bool holds(const std::vector<std::string>& phrase, DocId doc) const {
    for (const auto* words : {&titles[doc], &bodies[doc]}) {
      if (words->size() < phrase.size()) continue;
      for (size_t at = 0; at + phrase.size() <= words->size(); ++at)
        if (std::equal(phrase.begin(), phrase.end(), words->begin() + static_cast<std::ptrdiff_t>(at))) return true;
    }
    return false;
  }
};

const std::vector<std::string> kWords = {"wing", "flow", "the", "of", "shock", "wave", "layer", "boundary", "heat"};

std::string random_text(std::mt19937_64& rng, size_t most) {
  std::string text;
  for (size_t n = rng() % (most + 1); n > 0; --n) {
    text += kWords[std::min<size_t>(std::geometric_distribution<size_t>(0.3)(rng), kWords.size() - 1)];
    text += rng() % 7 == 0 ? ", " : " ";
  }
  return text;
}

void random_phrase_collection(std::mt19937_64& rng, size_t docs, uint32_t partitions, PhraseCollection& c) {
  BuildOptions options;
  options.partitions = partitions;
  options.positions = true;
  options.store = rng() % 2 == 0;
  IndexBuilder builder(options);
  Analyzer analyzer;
  for (size_t d = 0; d < docs; ++d) {
    SourceDocument doc{"d" + std::to_string(d), random_text(rng, 4), random_text(rng, 30), "", ""};
    if (d % 3 == 0)
      doc.source = nlohmann::json{{"id", doc.external_id}, {"title", doc.title}, {"body", doc.body}}.dump();
    builder.add_document(doc);
    c.titles.push_back(analyzer.analyze(doc.title));
    c.bodies.push_back(analyzer.analyze(doc.body));
    std::vector<std::string> all = c.titles.back();
    all.insert(all.end(), c.bodies.back().begin(), c.bodies.back().end());
    c.reference.add(all);
  }
  c.built = builder.build();
  c.reference.phrase_holds = [&c](const std::vector<std::string>& phrase, DocId doc) { return c.holds(phrase, doc); };
}

std::vector<std::string> random_phrase(std::mt19937_64& rng, const PhraseCollection& c) {
  const size_t length = 2 + rng() % 3;
  const auto& words = rng() % 2 ? c.bodies[rng() % c.bodies.size()] : c.titles[rng() % c.titles.size()];
  if (rng() % 4 == 0 || words.size() < length) {  // words at random: often held by no document
    std::vector<std::string> phrase;
    Analyzer analyzer;
    for (size_t i = 0; i < length; ++i) phrase.push_back(analyzer.analyze(kWords[rng() % kWords.size()])[0]);
    return phrase;
  }
  const size_t at = rng() % (words.size() - length + 1);
  return {words.begin() + static_cast<std::ptrdiff_t>(at), words.begin() + static_cast<std::ptrdiff_t>(at + length)};
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

TEST(Phrases, MatchTheReferenceOnRandomCollections) {
  // Past a chunk of positions in one partition, and three partitions of fewer documents.
  for (const auto [docs, partitions] : {std::pair<size_t, uint32_t>{kPositionChunkDocs + 3000, 1}, {3000, 3}}) {
    const uint64_t seed = testing::test_seed() + partitions;
    std::mt19937_64 rng(seed);
    PhraseCollection c;
    random_phrase_collection(rng, docs, partitions, c);
    uint64_t matched = 0;
    for (int q = 0; q < 150; ++q) {
      const std::vector<std::string> phrase = random_phrase(rng, c);
      std::vector<DocId> expected, actual;
      for (DocId d = 0; d < c.titles.size(); ++d)
        if (c.holds(phrase, d)) expected.push_back(d);
      PhraseStats stats;
      for (const BuiltPartition& p : c.built) {
        const std::vector<DocId> found = phrase_docs(phrase, p.view, &stats);
        actual.insert(actual.end(), found.begin(), found.end());
      }
      ASSERT_EQ(actual, expected) << "\"" << joined(phrase) << "\" seed " << seed;
      matched += expected.size();
    }
    EXPECT_GT(matched, 0u);
  }
}

TEST(Phrases, SearchesRankTheReferencesAllowedDocumentsInEveryMode) {
  for (uint32_t partitions : {1u, 3u}) {
    const uint64_t seed = testing::test_seed() + 40 + partitions;
    std::mt19937_64 rng(seed);
    PhraseCollection c;
    random_phrase_collection(rng, 2500, partitions, c);
    Analyzer analyzer;
    for (OrAlgorithm algorithm : {OrAlgorithm::kTiles, OrAlgorithm::kMaxScore, OrAlgorithm::kBlockMaxWand}) {
      const testing::InMemoryIndex index(c.built, algorithm);
      for (int q = 0; q < 40; ++q) {
        std::string text = "\"" + joined(random_phrase(rng, c)) + "\"";
        if (q % 2 == 0) text += " " + kWords[rng() % kWords.size()];
        if (q % 3 == 0) text += " -\"" + joined(random_phrase(rng, c)) + "\"";
        if (q % 5 == 0) text += " +" + kWords[rng() % kWords.size()];
        const size_t k = std::vector<size_t>{1, 10, 100}[q % 3];
        for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd, QueryMode::kAndOr}) {
          const Query query = analyze_query_syntax(text, analyzer, mode, k);
          ASSERT_FALSE(query.phrases.empty()) << text;
          ASSERT_TRUE(testing::same_topk(c.reference.search(query), index.search(query), c.reference, query.terms))
              << text << " mode " << to_string(mode) << " algorithm " << or_algorithm_name(algorithm) << " partitions "
              << partitions << " seed " << seed;
        }
      }
    }
  }
}

TEST(PhrasesOnDisk, ThePipelineWritesTheBuildersPositionsAndTheyAnswerAlike) {
  const fs::path dir = fs::temp_directory_path() / ("warp-phrases-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937_64 rng(testing::test_seed() + 7);
  {
    std::ofstream out(dir / "docs.jsonl");
    for (int d = 0; d < 4000; ++d)
      out << nlohmann::json{{"id", "d" + std::to_string(d)},
                            {"title", random_text(rng, 5)},
                            {"body", random_text(rng, 40)}}
                 .dump()
          << "\n";
    out << "{broken\n";
  }
  const std::string input = (dir / "docs.jsonl").string();
  for (bool positions : {true, false}) {
    BuildOptions build;
    build.partitions = 3;
    build.store = false;
    build.positions = positions;
    const testing::BothBuilds both = testing::build_both_ways(input, build, dir, std::to_string(positions));
    const std::vector<BuiltPartition>& built = both.built;
    const fs::path &reference = both.reference, &piped = both.piped;
    for (uint32_t p = 0; p < 3; ++p) {
      const std::string name = partition_dir_name(p);
      const std::vector<std::string> digest = partition_digest((piped / name).string());
      EXPECT_EQ(digest, partition_digest((reference / name).string())) << name;
      const auto rows = std::find_if(digest.begin(), digest.end(),
                                     [](const std::string& line) { return line.rfind("positions ", 0) == 0; });
      ASSERT_NE(rows, digest.end());
      EXPECT_EQ(*rows == "positions 0 0 0", !positions) << *rows;
      const auto opened = open_partition((piped / name).string());
      if (!positions) {
        EXPECT_FALSE(opened->view().positions);
        EXPECT_THROW(phrase_docs({"wing", "flow"}, opened->view()), Error);
        continue;
      }
      ASSERT_TRUE(opened->view().positions) << name;
      Analyzer analyzer;
      for (int q = 0; q < 40; ++q) {
        std::vector<std::string> phrase;
        for (size_t i = 0, n = 2 + rng() % 2; i < n; ++i)
          phrase.push_back(analyzer.analyze(kWords[std::min<size_t>(rng() % 5, kWords.size() - 1)])[0]);
        EXPECT_EQ(phrase_docs(phrase, opened->view()), phrase_docs(phrase, built[p].view)) << joined(phrase);
      }
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace warp
