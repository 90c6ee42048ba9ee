// A leaf's loaded generations: the GPU's processors made for a generation first opened for the CPU
// alone (a follower whose GPU was still held by the generation before) share its partitions and
// CPU processors instead of opening and checking them again, and answer as before once the
// CPU-only generation is gone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/service/leaf_server.hpp"
#include "tests/support/cranfield_index.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

// Every CPU processor's hits (document, score) for every query.
std::vector<std::vector<std::pair<DocId, Score>>> answers(const LoadedIndex& index, const std::vector<Query>& queries) {
  std::vector<std::vector<std::pair<DocId, Score>>> all;
  for (const auto& processor : index.cpu) {
    for (const Query& query : queries) {
      all.emplace_back();
      for (const Hit& hit : processor->search(query).hits) all.back().emplace_back(hit.doc, hit.score);
    }
  }
  return all;
}

TEST(LeafIndex, TheGpusGenerationSharesTheCpuOnesPartitionsAndProcessors) {
  const fs::path dir = fs::temp_directory_path() / ("warp-leaf-index-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::write_cranfield_index(dir.string(), /*partitions=*/3, /*generation=*/4);

  const std::vector<Query> queries = {{{"boundari", "layer"}, QueryMode::kOr, 10},
                                      {{"flow", "wing", "pressur"}, QueryMode::kAnd, 5},
                                      {{"heat", "transfer", "supersonic"}, QueryMode::kAndOr, 20}};
  std::shared_ptr<const LoadedIndex> on_cpu = load_index(dir.string(), {0, 2}, "cpu", gpu::GpuSettings{});
  ASSERT_EQ(on_cpu->partitions.size(), 2u);
  ASSERT_TRUE(on_cpu->gpu.empty());
  const auto expected = answers(*on_cpu, queries);
  size_t hits = 0;
  for (const auto& answer : expected) hits += answer.size();
  ASSERT_GT(hits, 0u) << "the queries should match Cranfield documents";

  const std::shared_ptr<const LoadedIndex> with = with_gpu(on_cpu, gpu::GpuSettings{});
  EXPECT_EQ(with->generation, 4u);
  EXPECT_EQ(with->analyzer, on_cpu->analyzer);
  EXPECT_FALSE(with->gpu_only);
  ASSERT_EQ(with->partitions.size(), on_cpu->partitions.size());
  for (size_t i = 0; i < with->partitions.size(); ++i) {
    EXPECT_EQ(with->partitions[i].get(), on_cpu->partitions[i].get()) << "partition " << i << " opened again";
    EXPECT_EQ(with->cpu[i].get(), on_cpu->cpu[i].get()) << "CPU processor " << i << " made again";
  }
  if (gpu::gpu_available()) {
    // A GPU here: its processors for both partitions, or the reason it could not take them.
    EXPECT_TRUE(with->gpu.size() == with->partitions.size() || !with->gpu_error.empty()) << with->gpu_error;
    EXPECT_TRUE(with->scheduled() || !with->gpu_error.empty());
  } else {
    EXPECT_TRUE(with->gpu.empty());
    EXPECT_EQ(with->gpu_error, "no usable GPU");
  }
  // The CPU-only generation released (as once the server swapped): the shared parts live on.
  const std::weak_ptr<const LoadedIndex> released = on_cpu;
  on_cpu.reset();
  EXPECT_TRUE(released.expired());
  EXPECT_EQ(answers(*with, queries), expected);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace warp
