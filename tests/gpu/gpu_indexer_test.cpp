// The GPU indexers (Wei & JaJa 2010 §III.D–E, sort-based on the device): the inverter against a
// reference inversion of random batches, hash collisions detected, and whole builds with GPU
// indexers identical row for row to the CPU-only build — with small budgets (many GPU batches),
// several GPU indexers, and a hash cut to a few bits so batches fall back to the CPU. The parsers'
// GPU analysis (gpu_analyzer.hpp): its stems against the CPU analyzer's on random text, and builds
// with it identical to the CPU-only build. Skips where no CUDA GPU is usable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "common/analysis/analyzer.hpp"
#include "common/analysis/shared_stem_cache.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/gpu/gpu_inverter.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/postings/trie_collections.hpp"
#include "tests/support/test_data.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;
using pipeline::PieceEntry;

#define WARP_REQUIRE_GPU()                                                                    \
  do {                                                                                        \
    std::string why;                                                                          \
    if (!pipeline::gpu_inverter_available(0, &why)) GTEST_SKIP() << "no usable GPU: " << why; \
  } while (0)

// A random batch: terms of a small vocabulary spread over a few collections, each (doc, term)
// once, in no particular order.
void random_batch(std::mt19937_64& rng, size_t docs, std::vector<PieceEntry>& entries, std::string& suffixes) {
  std::vector<std::pair<uint32_t, std::string>> vocabulary;
  for (int t = 0; t < 3000; ++t) {
    std::string suffix(rng() % 9, 'a');
    for (char& c : suffix) c = static_cast<char>('a' + rng() % 5);
    const uint32_t collection =
        rng() % 3 == 0 ? 17576 + static_cast<uint32_t>(rng() % 37) : static_cast<uint32_t>(rng() % 7);
    vocabulary.emplace_back(collection, suffix);
  }
  std::sort(vocabulary.begin(), vocabulary.end());
  vocabulary.erase(std::unique(vocabulary.begin(), vocabulary.end()), vocabulary.end());
  for (uint32_t d = 0; d < docs; ++d) {
    std::vector<size_t> terms;
    for (int k = 0; k < 30; ++k) terms.push_back(rng() % vocabulary.size());
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
    for (size_t t : terms) {
      const auto& [collection, suffix] = vocabulary[t];
      entries.push_back({collection, static_cast<uint32_t>(suffixes.size()), static_cast<uint32_t>(suffix.size()),
                         static_cast<uint32_t>(rng() % 1000000), 1 + static_cast<uint32_t>(rng() % 9)});
      suffixes += suffix;
    }
  }
  std::shuffle(entries.begin(), entries.end(), rng);
}

TEST(GpuInverter, MatchesAReferenceInversion) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  pipeline::GpuInverter inverter(0);
  for (size_t docs : {1, 7, 500, 20000}) {
    std::vector<PieceEntry> entries;
    std::string suffixes;
    random_batch(rng, docs, entries, suffixes);
    // Unique (doc, term): a doc drawn twice for one term keeps its first entry.
    std::map<std::pair<uint32_t, std::string>, std::map<uint32_t, uint32_t>> reference;
    std::vector<PieceEntry> unique;
    for (const PieceEntry& e : entries) {
      auto& list = reference[{e.collection, suffixes.substr(e.suffix_offset, e.suffix_size)}];
      if (list.emplace(e.doc, e.freq).second) unique.push_back(e);
    }
    pipeline::InvertedBatch batch;
    inverter.invert(unique, suffixes, batch);
    ASSERT_FALSE(batch.collision);
    ASSERT_EQ(batch.names.size(), reference.size()) << docs << " documents";
    ASSERT_EQ(batch.starts.size(), reference.size() + 1);
    ASSERT_EQ(batch.starts.back(), unique.size());
    std::map<std::pair<uint32_t, std::string>, std::map<uint32_t, uint32_t>> inverted;
    for (size_t t = 0; t < batch.names.size(); ++t) {
      const PieceEntry& name = unique[batch.names[t]];
      auto& list = inverted[{name.collection, suffixes.substr(name.suffix_offset, name.suffix_size)}];
      ASSERT_TRUE(list.empty()) << "a term named twice";
      for (uint32_t i = batch.starts[t]; i < batch.starts[t + 1]; ++i) {
        if (i > batch.starts[t]) {
          ASSERT_LT(batch.postings[i - 1].doc, batch.postings[i].doc) << "docs in order";
        }
        list.emplace(batch.postings[i].doc, batch.postings[i].freq);
      }
    }
    ASSERT_EQ(inverted, reference);
    // The device's term order: every term once, keys ascending, each key the term's first 8 bytes.
    ASSERT_EQ(batch.order.size(), reference.size());
    std::vector<uint32_t> seen(batch.order);
    std::sort(seen.begin(), seen.end());
    for (uint32_t t = 0; t < seen.size(); ++t) ASSERT_EQ(seen[t], t);
    for (size_t i = 0; i < batch.order.size(); ++i) {
      if (i > 0) {
        ASSERT_LE(batch.keys[i - 1], batch.keys[i]);
      }
      const PieceEntry& name = unique[batch.names[batch.order[i]]];
      std::string term =
          pipeline::collection_prefix(name.collection) + suffixes.substr(name.suffix_offset, name.suffix_size);
      term.resize(std::max<size_t>(term.size(), 8), '\0');
      uint64_t key = 0;
      for (int b = 0; b < 8; ++b) key = (key << 8) | static_cast<unsigned char>(term[b]);
      ASSERT_EQ(batch.keys[i], key);
    }
  }
}

TEST(GpuInverter, HashCollisionsAreDetected) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  std::vector<PieceEntry> entries;
  std::string suffixes;
  random_batch(rng, 200, entries, suffixes);
  pipeline::InvertedBatch batch;
  pipeline::GpuInverter(0, 6).invert(entries, suffixes, batch);  // 64 hash values for ~1,000 terms
  EXPECT_TRUE(batch.collision);
}

// Random text: words of a vocabulary (mixed case, digits, lengths up to 80 bytes: past the GPU
// table's 24 and the analyzer's cap of 64), punctuation between them, and now and then a word
// outside ASCII, which sends its whole document to the CPU.
std::string random_text(std::mt19937_64& rng, const std::vector<std::string>& vocabulary, size_t words) {
  static const char* const kSeparators[] = {" ", "  ", ", ", ". ", "-", "\n", "\t",
                                            "'", "/",  "(",  ") ", "_", "\"", "\0"};
  static const char* const kOther[] = {"caf\xC3\xA9", "\xCE\x9B\xCF\x8C\xCE\xB3\xCE\xBF\xCF\x82", "na\xC3\xAFve",
                                       "\xE2\x80\x94", "\xFF"};
  std::string text;
  for (size_t w = 0; w < words; ++w) {
    if (rng() % 400 == 0) {
      text += kOther[rng() % 5];
    } else {
      text += vocabulary[rng() % vocabulary.size()];
    }
    const char* separator = kSeparators[rng() % 14];
    text.append(separator, separator[0] == '\0' ? 1 : std::strlen(separator));
  }
  return text;
}

std::vector<std::string> random_vocabulary(std::mt19937_64& rng, size_t words) {
  std::vector<std::string> vocabulary;
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (size_t i = 0; i < words; ++i) {
    size_t size = 1 + rng() % 12;
    if (rng() % 20 == 0) size = 20 + rng() % 61;  // about the slot's 24 bytes and the cap's 64
    std::string word;
    for (size_t k = 0; k < size; ++k) word += letters[rng() % (k < 3 ? 26 : letters.size())];
    if (rng() % 3 == 0) word += "ing";
    vocabulary.push_back(word);
  }
  return vocabulary;
}

// The GPU's stems, with its misses answered on the CPU as the parsers do, are the CPU analyzer's,
// document by document: while the GPU's table is empty, as it learns, with the shared stem cache
// frozen (the analyzer's own ids), for a small length cap, and for documents outside ASCII.
TEST(GpuAnalysis, StemsAreTheCpuAnalyzersAndTheTableLearns) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  for (const size_t max_token : {size_t{64}, size_t{5}}) {
    for (const size_t shared_tokens : {size_t{1} << 16, size_t{256}}) {
      const std::string context =
          "cap " + std::to_string(max_token) + ", shared cache of " + std::to_string(shared_tokens);
      AnalyzerConfig config;
      config.max_token_bytes = max_token;
      Analyzer reference(config), analyzer(config);
      SharedStemCache shared(shared_tokens);
      analyzer.limit_stem_cache(1024);  // emptied now and then, as in a build
      analyzer.share_stem_cache(&shared);
      pipeline::GpuTokenTable table(0, shared.capacity());
      pipeline::GpuAnalyzer gpu(table, max_token);
      const std::vector<std::string> vocabulary = random_vocabulary(rng, 3000);
      uint64_t first_misses = 0, last_misses = 0, tokens = 0, first_tokens = 0, last_tokens = 0;
      const int chunks = 6;
      for (int c = 0; c < chunks; ++c) {
        std::vector<std::pair<std::string, std::string>> docs;
        const size_t count = 1 + rng() % 300;
        for (size_t d = 0; d < count; ++d)
          docs.emplace_back(random_text(rng, vocabulary, rng() % 6), random_text(rng, vocabulary, rng() % 120));
        gpu.begin_chunk();
        for (const auto& [title, body] : docs) gpu.add_document(title, body);
        gpu.run();
        ASSERT_EQ(gpu.documents(), docs.size());
        uint32_t next = 0;
        uint64_t misses = 0;
        std::string folded;
        std::vector<uint32_t> stems;
        for (size_t d = 0; d < docs.size(); ++d) {
          analyzer.trim_stem_cache();
          std::vector<std::string> expected = reference.analyze(docs[d].first);
          reference.analyze(docs[d].second, expected);
          const bool ascii =
              std::all_of(docs[d].first.begin(), docs[d].first.end(), [](char ch) { return (ch & 0x80) == 0; }) &&
              std::all_of(docs[d].second.begin(), docs[d].second.end(), [](char ch) { return (ch & 0x80) == 0; });
          ASSERT_EQ(gpu.non_ascii(d), !ascii) << context << ", document " << d;
          stems.clear();
          ASSERT_EQ(pipeline::take_document_stems(gpu, d, next, analyzer, stems, folded, misses), ascii);
          if (!ascii) continue;
          std::vector<std::string> got;
          for (uint32_t id : stems) got.emplace_back(analyzer.stem(id));
          ASSERT_EQ(got, expected) << context << ", chunk " << c << ", document " << d << ": "
                                   << docs[d].second.substr(0, 200);
        }
        ASSERT_EQ(next, gpu.tokens()) << context;
        tokens += gpu.tokens();
        if (c == 0) first_misses = misses, first_tokens = gpu.tokens();
        last_misses = misses, last_tokens = gpu.tokens();
      }
      // The table learns: with room for the vocabulary, its last chunk misses a far smaller share of
      // its tokens than its first (shares: the chunks' sizes are random).
      if (shared_tokens > vocabulary.size() * 2 && max_token == 64) {
        EXPECT_GT(first_misses, 0u) << context;
        EXPECT_LT(static_cast<double>(last_misses) / last_tokens * 4, static_cast<double>(first_misses) / first_tokens)
            << context << ": the GPU's table does not learn (" << first_misses << " of " << first_tokens
            << " tokens missed in the first chunk, " << last_misses << " of " << last_tokens << " in the last)";
      }
      std::printf("%s: %llu tokens, misses in the first chunk %llu, in the last %llu, %.3f s on the GPU\n",
                  context.c_str(), static_cast<unsigned long long>(tokens),
                  static_cast<unsigned long long>(first_misses), static_cast<unsigned long long>(last_misses),
                  gpu.gpu_seconds());
    }
  }
}

class GpuIndexerBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-gpu-indexer-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> build(const std::vector<std::string>& inputs, pipeline::PipelineOptions options,
                                 pipeline::PipelineReport& report) {
    const fs::path out = dir_ / ("index-" + std::to_string(next_++));
    options.spill_dir = (dir_ / "runs").string();
    ReadReport read;
    report = pipeline::build_index(inputs, options, out.string(), read);
    std::vector<std::string> lines;
    for (uint32_t p = 0; fs::exists(out / partition_dir_name(p)); ++p) {
      for (const std::string& line : partition_digest((out / partition_dir_name(p)).string())) lines.push_back(line);
    }
    return lines;
  }
  static std::vector<std::string> cranfield_and_cisi() {
    return {testing::test_data_dir() + "/cranfield/docs.jsonl", testing::test_data_dir() + "/cisi/docs.jsonl"};
  }
  // The CPU-only build the others are compared with: 3 partitions, 4 threads (set in `options`).
  std::vector<std::string> cpu_build(pipeline::PipelineOptions& options, pipeline::PipelineReport& report) {
    options.build.partitions = 3;
    options.threads = 4;
    return build(cranfield_and_cisi(), options, report);
  }
  fs::path dir_;
  int next_ = 0;
};

TEST_F(GpuIndexerBuild, PartitionsAreTheCpuBuildsRowForRow) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  pipeline::PipelineOptions options;
  pipeline::PipelineReport report;
  const std::vector<std::string> inputs = cranfield_and_cisi();
  const auto cpu = cpu_build(options, report);
  ASSERT_FALSE(cpu.empty());
  struct Variant {
    size_t gpu_indexers, cpu_indexers;
    uint64_t budget;
    unsigned hash_bits;
    double speed;
  };
  for (const Variant& v : {Variant{1, 0, 2ull << 30, 64, 0}, Variant{2, 1, 8u << 20, 64, 8}, Variant{1, 2, 1, 64, 50},
                           Variant{2, 0, 4u << 20, 12, 8}}) {
    options.gpu_indexers = v.gpu_indexers;
    options.indexers = v.cpu_indexers;
    options.memory_budget = v.budget;
    options.gpu_hash_bits = v.hash_bits;
    options.gpu_speed = v.speed;
    options.chunk_bytes = (8 + rng() % 64) << 10;
    const std::string context = std::to_string(v.gpu_indexers) + " GPU indexers, " + std::to_string(v.cpu_indexers) +
                                " CPU, budget " + std::to_string(v.budget) + ", hash bits " +
                                std::to_string(v.hash_bits);
    EXPECT_EQ(build(inputs, options, report), cpu) << context;
    EXPECT_GT(report.gpu_speed, 0) << context;
    EXPECT_GT(report.gpu_seconds, 0) << context << ": the GPU indexed nothing";
    if (v.hash_bits < 64) {
      EXPECT_GT(report.gpu_fallbacks, 0u) << context << ": no batch fell back to the CPU";
    } else {
      EXPECT_EQ(report.gpu_fallbacks, 0u) << context;
    }
    std::printf("%s: %llu runs, GPU speed %.1f, %.3f s on the GPU, %llu fallbacks\n", context.c_str(),
                static_cast<unsigned long long>(report.runs_written), report.gpu_speed, report.gpu_seconds,
                static_cast<unsigned long long>(report.gpu_fallbacks));
  }
}

// Builds with the parsers' analysis on the GPU give the CPU build's partitions: thread counts,
// budgets small enough to freeze the shared stem cache (the analyzer's own ids) and spill many
// runs, with GPU indexers beside it. (Documents outside ASCII: the analysis test above.)
TEST_F(GpuIndexerBuild, GpuAnalysisGivesTheCpuBuildsPartitions) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  pipeline::PipelineOptions options;
  pipeline::PipelineReport report;
  const std::vector<std::string> inputs = cranfield_and_cisi();
  const auto cpu = cpu_build(options, report);
  ASSERT_FALSE(cpu.empty());
  struct Variant {
    size_t threads, gpu_indexers;
    uint64_t budget;
  };
  options.gpu_analysis = true;
  options.gpu_analysis_min_bytes = 0;      // these inputs are far too small to use it otherwise
  options.gpu_analysis_min_budget = 0;     // and some budgets
  options.gpu_analysis_from_start = true;  // these builds would end before the GPU is up
  for (const Variant& v :
       {Variant{4, 0, 2ull << 30}, Variant{1, 0, 2ull << 30}, Variant{7, 0, 1}, Variant{3, 1, 8u << 20}}) {
    options.threads = v.threads;
    options.gpu_indexers = v.gpu_indexers;
    options.memory_budget = v.budget;
    options.chunk_bytes = (8 + rng() % 64) << 10;
    const std::string context = std::to_string(v.threads) + " threads, " + std::to_string(v.gpu_indexers) +
                                " GPU indexers, budget " + std::to_string(v.budget) + ", chunks of " +
                                std::to_string(options.chunk_bytes) + " bytes";
    EXPECT_EQ(build(inputs, options, report), cpu) << context;
    EXPECT_GT(report.gpu_analysis_documents, 0u) << context << ": the GPU analyzed nothing";
    EXPECT_GT(report.gpu_analysis_tokens, report.gpu_analysis_misses) << context;
    EXPECT_EQ(report.gpu_analysis_documents + report.gpu_analysis_cpu_documents, 2860u)
        << context << ": every document analyzed";
    EXPECT_EQ(report.gpu_analysis_early_documents, 0u) << context << ": every parser waited for its GPU analyzer";
    EXPECT_GT(report.gpu_analysis_ready_first, 0.0) << context;
    EXPECT_GE(report.gpu_analysis_ready_last, report.gpu_analysis_ready_first) << context;
    EXPECT_TRUE(report.gpu_analysis_failure.empty()) << context << ": " << report.gpu_analysis_failure;
    if (v.gpu_indexers == 0) {  // the parsers' own indexers: their runs sorted on the device
      EXPECT_GT(report.gpu_analysis_run_postings, 0u) << context << ": no run took its postings from the GPU";
    }
    std::printf(
        "%s: %llu documents on the GPU, %llu on the CPU, %llu tokens, %llu misses, %llu run postings from the GPU, "
        "%.3f s on the GPU\n",
        context.c_str(), static_cast<unsigned long long>(report.gpu_analysis_documents),
        static_cast<unsigned long long>(report.gpu_analysis_cpu_documents),
        static_cast<unsigned long long>(report.gpu_analysis_tokens),
        static_cast<unsigned long long>(report.gpu_analysis_misses),
        static_cast<unsigned long long>(report.gpu_analysis_run_postings), report.gpu_analysis_seconds);
  }
  // As a build runs it: the parsers on the CPU until the GPU is up, then on the GPU.
  options.gpu_analysis_from_start = false;
  options.threads = 4;
  options.memory_budget = 2ull << 30;
  options.gpu_indexers = 0;
  EXPECT_EQ(build(inputs, options, report), cpu) << "parsers taking the GPU once it is up";
  EXPECT_TRUE(report.gpu_analysis_failure.empty()) << report.gpu_analysis_failure;
  EXPECT_EQ(report.gpu_analysis_documents + report.gpu_analysis_cpu_documents + report.gpu_analysis_early_documents,
            2860u)
      << "every document counted, those analyzed before the GPU was ready too";
  // The GPU failing during the build: the CPU analyzes the rest, the same partitions, the reason
  // kept. Where the device inverts (no GPU indexers), the failure comes at a chunk's inversion, after
  // its analysis; with a GPU indexer, at a chunk's start.
  options.gpu_analysis_from_start = true;
  options.gpu_analysis_fail_after = 2;
  options.chunk_bytes = 16u << 10;
  for (const size_t gpu_indexers : {0, 1}) {
    options.gpu_indexers = gpu_indexers;
    const std::string context = "a GPU failing after two chunks, " + std::to_string(gpu_indexers) + " GPU indexers";
    EXPECT_EQ(build(inputs, options, report), cpu) << context;
    EXPECT_NE(report.gpu_analysis_failure.find("simulated"), std::string::npos)
        << context << ": " << report.gpu_analysis_failure;
    EXPECT_GT(report.gpu_analysis_documents, 0u) << context;
    EXPECT_LT(report.gpu_analysis_documents + report.gpu_analysis_cpu_documents, 2860u)
        << context << ": documents after the failure are the CPU's alone";
  }
  // The GPU failing at a spill of the run it holds (its sort; halfway through the spill, at its
  // first fetch): the run's chunks are read and analyzed again on the CPU, the same partitions.
  options.gpu_analysis_fail_after = 0;
  options.gpu_indexers = 0;
  for (const int step : {0, 2}) {
    options.gpu_analysis_fail_run_step = step;
    options.memory_budget = step == 0 ? 2ull << 30 : 8u << 20;  // one run a parser, or several
    const std::string context = "a GPU failing at a spill's " + std::string(step == 0 ? "sort" : "first fetch");
    EXPECT_EQ(build(inputs, options, report), cpu) << context;
    EXPECT_NE(report.gpu_analysis_failure.find("simulated"), std::string::npos)
        << context << ": " << report.gpu_analysis_failure;
    EXPECT_EQ(report.gpu_analysis_run_postings, 0u) << context << ": the failed runs' postings came from the CPU";
  }
  options.gpu_analysis_fail_run_step = -1;
  // Too little input a parser (under the default 64 MiB): the GPU is checked but left unused.
  options = pipeline::PipelineOptions();
  options.gpu_analysis = true;
  options.build.partitions = 3;  // as cpu_build's
  options.threads = 4;
  EXPECT_EQ(build(inputs, options, report), cpu) << "the GPU left unused";
  EXPECT_TRUE(report.gpu_analysis_unused);
  EXPECT_LT(report.gpu_analysis_bytes_per_parser, uint64_t{64} << 20);
  // Or too small a budget for it (under 1.5 GiB), whatever the input.
  options.gpu_analysis_min_bytes = 0;
  options.memory_budget = 1u << 30;
  EXPECT_EQ(build(inputs, options, report), cpu) << "the GPU left unused under a 1 GiB budget";
  EXPECT_TRUE(report.gpu_analysis_unused);
  EXPECT_EQ(report.gpu_analysis_documents + report.gpu_analysis_cpu_documents + report.gpu_analysis_early_documents,
            0u);
  EXPECT_EQ(report.gpu_analysis_documents + report.gpu_analysis_cpu_documents + report.gpu_analysis_early_documents,
            0u);
  EXPECT_TRUE(report.gpu_analysis_failure.empty()) << report.gpu_analysis_failure;
}

}  // namespace
}  // namespace warp
