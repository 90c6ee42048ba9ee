// A reader/parser thread of the parse stage (Wei & JaJa 2010 §III.C): it takes splits of the input
// (SplitTaker), reads each chunk by chunk, analyzes every document (on the CPU, or on its GPU
// analyzer with --gpu-analysis) and hands the postings on: to its own indexer (ParserIndexer), to
// the parsers owning their stems (PostingRouter), or as pieces to the indexers owning their
// collections. ParseShared is what every parser of one build shares (parse_stage.cpp makes it).
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "common/analysis/shared_stem_cache.hpp"
#include "common/util/bounded_queue.hpp"
#include "indexer/pipeline/build_plan.hpp"
#include "indexer/pipeline/doc_table.hpp"
#include "indexer/pipeline/final_order.hpp"
#include "indexer/pipeline/gpu_analysis_start.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/pipeline/posting_router.hpp"

namespace warp::pipeline {

struct ParseShared {
  ParseShared(const BuildPlan& plan_in, const PipelineOptions& options_in, std::string spill_dir_in, DocTable& docs_in,
              SharedStemCache& shared_stems_in, GpuAnalysisStart& gpu_start_in, SplitTaker& split_taker_in,
              PostingRouter* router_in)
      : plan(plan_in),
        options(options_in),
        spill_dir(std::move(spill_dir_in)),
        docs(docs_in),
        shared_stems(shared_stems_in),
        gpu_start(gpu_start_in),
        split_taker(split_taker_in),
        router(router_in) {}

  const BuildPlan& plan;
  const PipelineOptions& options;
  std::string spill_dir;
  DocTable& docs;
  SharedStemCache& shared_stems;
  GpuAnalysisStart& gpu_start;
  SplitTaker& split_taker;
  PostingRouter* router;                                     // where parsers route their shared stems' postings
  std::vector<uint32_t> owner;                               // trie collection → indexer slot
  std::vector<std::unique_ptr<BoundedQueue<Piece>>> pieces;  // by slot
  std::function<uint64_t()> share;                           // an indexer's share of the budget now
  std::vector<std::vector<RunInfo>> parser_runs;             // by parser: its own indexer's runs
  std::atomic<uint64_t> runs_written{0}, bytes_read{0}, excluded{0};

  // A failed build: the first failure is kept, everybody stops.
  std::atomic<bool> failed{false};
  void record_failure();  // from a catch block
  std::exception_ptr failure;

  // The GPU analysis, summed over parsers. A GPU that fails during the build (a CUDA error, out
  // of memory) leaves the rest of the analysis to the CPU: every parser drops it, the first
  // failure's reason is reported.
  std::atomic<uint64_t> gpu_documents{0}, gpu_cpu_documents{0}, gpu_early_documents{0}, gpu_misses{0}, gpu_tokens{0},
      gpu_run_postings{0};
  std::atomic<double> gpu_seconds{0};
  std::atomic<bool> gpu_failed{false};
  void record_gpu_failure(const char* why);
  std::string gpu_failure;
  std::mutex mutex;  // guards `failure` and `gpu_failure`
};

// Parser `index`'s whole work: every split it takes, then its last hand-overs and its indexer's
// last run (into shared.parser_runs). Throws what stops the build (an unreadable input).
void run_parser(ParseShared& shared, size_t index);

}  // namespace warp::pipeline
