// The plan stage of a build: from the options and the inputs' sizes, how many threads do what,
// how the memory budget is divided among chunks in flight, stem caches and indexers, and how the
// input is cut into splits. Nothing is read or written but the inputs' sizes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "indexer/pipeline/pipeline_options.hpp"
#include "indexer/reader/document_reader.hpp"

namespace warp::pipeline {

// Postings a parser holds for other parsers before it hands them over (PostingRouter), 768 KiB:
// at 16 threads a parser indexes ~5 million postings a second (2 GiB, 154 million postings, a
// parse of ~1.9 s on the H200 host), so it hands over, and takes its own inbox, every ~13 ms.
inline constexpr size_t kHandOverPostings = size_t{1} << 16;

struct BuildPlan {
  size_t threads = 0;  // at work at once in every phase
  size_t parsers = 0;
  size_t indexers = 0;         // indexer threads owning collections (0: the parsers index)
  size_t gpu_indexers = 0;     // GPU indexer threads
  bool parsers_index = false;  // every parser indexes its own chunks with an indexer of its own
  // Indexer slots: the CPU side (the parsers' own indexers as one slot, or the indexer threads),
  // then the GPU indexers; `cpu_indexers` is how many indexers hold postings on the CPU.
  size_t cpu_slots = 0, slots = 0, cpu_indexers = 0;
  bool own_takes_all = false;  // the parsers' own indexers take every collection (one slot)
  bool route = false;          // parsers hand each other the postings of the shared stems they own
  uint64_t budget = 0;         // bytes for the whole build
  uint64_t chunk_bytes = 0;    // input bytes a parser analyzes at a time
  size_t own_stem_cache = 0;   // tokens of each parser's own stem cache
  // The shared stem cache: its first segment's tokens, the most it may grow to (0: one segment).
  uint64_t shared_first = 0, shared_most = 0;
  uint64_t stem_array_bytes = 0;  // the parsers' arrays by stem id, per shared stem
  // Bytes in flight besides the shared stem cache's first segment: chunks, pieces, hand-overs,
  // the GPU's fetch buffers and the parsers' own stem caches.
  uint64_t in_flight = 0;
  std::vector<std::string> files;  // the inputs, expanded
  uint64_t total_file_bytes = 0;
  std::vector<InputSplit> splits;
  std::vector<uint64_t> split_sizes;  // bytes of each split, in input order
  // --gpu-analysis: too little input a parser or budget for the GPU to repay its start-up (a
  // usable GPU is still required), and the CUDA driver's host memory where it does run.
  bool gpu_unused = false;
  uint64_t bytes_per_parser = 0;
  uint64_t gpu_runtime = 0;
};

// Throws Error on options that cannot build (no partitions, an unknown codec, GPU analysis with
// stop words) before anything is read.
BuildPlan plan_build(const std::vector<std::string>& inputs, const PipelineOptions& options);

}  // namespace warp::pipeline
