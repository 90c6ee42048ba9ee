// The GPU indexers (Wei & JaJa 2010 §III.D–E, sort-based on the device): the inverter against a
// reference inversion of random batches, hash collisions detected, and whole builds with GPU
// indexers identical row for row to the CPU-only build — with small budgets (many GPU batches),
// several GPU indexers, and a hash cut to a few bits so batches fall back to the CPU. Skips where
// no CUDA GPU is usable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "indexer/gpu/gpu_inverter.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/pipeline/trie_collections.hpp"
#include "tests/support/shared_data.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;
using pipeline::PieceEntry;

#define WARP_REQUIRE_GPU()                                                                      \
  do {                                                                                          \
    std::string why;                                                                            \
    if (!pipeline::gpu_inverter_available(0, &why)) GTEST_SKIP() << "no usable GPU: " << why;   \
  } while (0)

// A random batch: terms of a small vocabulary spread over a few collections, each (doc, term)
// once, in no particular order.
void random_batch(std::mt19937_64& rng, size_t docs, std::vector<PieceEntry>& entries, std::string& suffixes) {
  std::vector<std::pair<uint32_t, std::string>> vocabulary;
  for (int t = 0; t < 3000; ++t) {
    std::string suffix(rng() % 9, 'a');
    for (char& c : suffix) c = static_cast<char>('a' + rng() % 5);
    const uint32_t collection = rng() % 3 == 0 ? 17576 + static_cast<uint32_t>(rng() % 37) : static_cast<uint32_t>(rng() % 7);
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
      std::string term = pipeline::collection_prefix(name.collection) + suffixes.substr(name.suffix_offset, name.suffix_size);
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
  fs::path dir_;
  int next_ = 0;
};

TEST_F(GpuIndexerBuild, PartitionsAreTheCpuBuildsRowForRow) {
  WARP_REQUIRE_GPU();
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<std::string> inputs = {testing::shared_data_dir() + "/cranfield/docs.jsonl",
                                           testing::shared_data_dir() + "/cisi/docs.jsonl"};
  pipeline::PipelineOptions options;
  options.build.partitions = 3;
  options.threads = 4;
  pipeline::PipelineReport report;
  const auto cpu = build(inputs, options, report);
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
                                " CPU, budget " + std::to_string(v.budget) + ", hash bits " + std::to_string(v.hash_bits);
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

}  // namespace
}  // namespace warp
