// What a build is asked for (PipelineOptions), what it shows as it goes (PipelineProgress) and what
// it reports at the end (PipelineReport): shared by the driver (parallel_builder.hpp) and its stages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/index/index_builder.hpp"

namespace warp::pipeline {

struct PipelineOptions {
  BuildOptions build;
  // Threads at work at once in every phase (0: one per core): reader/parsers (plus indexer
  // threads, if any) while reading, back-end threads after.
  size_t threads = 0;
  size_t parsers = 0;                   // reader/parser threads (0: `threads` less the indexer threads)
  size_t indexers = 0;                  // indexer threads owning collections (0: none, every parser
                                        // indexes its own chunks with an indexer of its own)
  uint64_t memory_budget = 2ull << 30;  // bytes for the whole build
  size_t gpu_indexers = 0;              // GPU indexer threads besides the CPU ones (indexers.hpp)
  int gpu_device = 0;
  double gpu_speed = 0;         // a GPU indexer's share in CPU indexers (0: measured on a sample)
  unsigned gpu_hash_bits = 64;  // tests only: fewer bits, hash collisions, the CPU fallback
  bool gpu_analysis = false;    // the parsers' tokenizing and stem lookups on the GPU (gpu_analyzer.hpp)
  // Input bytes a parser below which --gpu-analysis leaves the GPU unused: the CUDA context and the
  // analyzers take 0.3-0.7 s to be ready, and a build of a few hundred MB at 16 threads had been
  // 0.7-0.9x as fast with them (tests/bench/results/indexing.md). A usable GPU is still required. 0: always used.
  uint64_t gpu_analysis_min_bytes = uint64_t{64} << 20;
  // A memory budget below which --gpu-analysis leaves the GPU unused: the CUDA driver's host memory
  // (192 MiB counted) and the spill's arrays for the runs on the device leave the parsers' lists too
  // little of a smaller one (1 GiB: 729 runs, 1.3x the CPU build's time; tests/bench/results/indexing.md). 0: always
  // used.
  uint64_t gpu_analysis_min_budget = uint64_t{1536} << 20;
  bool gpu_analysis_from_start =
      false;                           // tests: parsers wait for the GPU instead of analyzing on the CPU until it is up
  size_t gpu_analysis_fail_after = 0;  // tests: a parser's GPU fails after this many chunks (0: never)
  int gpu_analysis_fail_run_step =
      -1;  // tests: a parser's first spill of a run on its GPU fails at its sort (0), order (1) or first fetch (2)
  uint64_t split_bytes = 0;        // bytes per split of a large file (0: input / 4 parsers, 1–64 MiB)
  uint64_t chunk_bytes = 0;        // input bytes a parser analyzes at a time (0: from the budget)
  uint64_t stem_cache_tokens = 0;  // tests: the shared stem cache's first segment (0: from the budget)
  // Parsers that index their own chunks hand each other the postings of the shared stems each owns
  // (posting_router.hpp); off only in tests, which compare the partitions either way.
  bool route_postings = true;
  std::string spill_dir;  // run files and the document spill (created, removed at the end)
  // Documents whose id is here are skipped as they are read (deleted through the write API).
  std::shared_ptr<const std::unordered_set<std::string>> excluded_ids{};
};

struct PipelineProgress {
  uint64_t documents = 0;
  uint64_t bytes = 0;
  uint64_t total_bytes = 0;  // input files on disk, for an ETA
  uint64_t runs_written = 0;
};

struct BuiltSummary {
  PartitionMeta meta;
  uint64_t terms = 0;
  uint64_t list_bytes = 0;  // encoded lists
};

struct PipelineReport {
  uint64_t documents = 0;
  uint64_t excluded = 0;  // skipped for their id (PipelineOptions::excluded_ids)
  uint64_t runs_written = 0;
  uint64_t runs_merged = 0;
  size_t parsers = 0, indexers = 0, backend_threads = 0, splits = 0;
  bool parsers_index = false;  // every parser indexed its own chunks (no indexer threads)
  double gpu_speed = 0;        // a GPU indexer's share, in CPU indexers
  double gpu_seconds = 0;      // GPU indexers' device work and copies, summed
  uint64_t gpu_fallbacks = 0;  // GPU batches with a hash collision, indexed on the CPU instead
  // --gpu-analysis: documents analyzed on the GPU (the others held bytes outside ASCII), their
  // chunks' tokens, the tokens the GPU's table missed, device work and copies summed over parsers.
  uint64_t gpu_analysis_documents = 0, gpu_analysis_cpu_documents = 0, gpu_analysis_tokens = 0, gpu_analysis_misses = 0;
  uint64_t gpu_analysis_early_documents = 0;  // analyzed on the CPU before the parser's GPU analyzer was ready
  uint64_t gpu_analysis_run_postings = 0;     // written to runs in the order the GPU sorted them in (RunOnDevice)
  double gpu_analysis_seconds = 0;
  double gpu_analysis_ready_first = 0,
         gpu_analysis_ready_last = 0;  // seconds into the build: the parsers' analyzers ready
  std::string gpu_analysis_failure;    // why the GPU stopped analyzing during the build (the CPU went on)
  bool gpu_analysis_unused =
      false;  // too little input a parser or budget (gpu_analysis_min_*): the CPU analyzed it all
  uint64_t gpu_analysis_bytes_per_parser = 0;
  uint64_t chunk_bytes = 0;
  // The parsers' shared stem cache at the end: segments opened, stems named, and whether it froze
  // (the words it could not hold were then cached by each parser on its own).
  size_t stem_cache_segments = 0;
  uint64_t stem_cache_stems = 0;
  bool stem_cache_frozen = false;
  uint64_t routed_postings = 0;          // handed from the parser that read them to the one owning their stem
  double parse_seconds = 0;              // reading, parsing and indexing, until the last run is written
  double merge_seconds = 0;              // final docIDs and duplicates, beside the back end's term ranges and databases
  double encode_seconds = 0;             // k-way merge of the runs, encoding, SST files moved into the partitions
  double write_seconds = 0;              // meta rows, documents, checksums, manifest
  std::vector<BuiltSummary> partitions;  // empty when the inputs held no document
};

}  // namespace warp::pipeline
