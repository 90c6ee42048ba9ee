// The parse stage of a build: reader/parser threads (parser.hpp) and indexer threads (indexers.hpp)
// turn the input into sorted runs on disk and the documents into the DocTable's spill, with
// progress reported four times a second.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "indexer/pipeline/build_plan.hpp"
#include "indexer/pipeline/doc_table.hpp"
#include "indexer/pipeline/final_order.hpp"
#include "indexer/pipeline/run_file.hpp"

namespace warp::pipeline {

struct ParseOutput {
  // Every run: the parsers' own indexers' runs parser by parser (each parser's in the order it
  // wrote them: parser t reads the t-th range of splits front to back, so these runs are in docID
  // order but for the splits taken from another parser's range at the end), then the indexer
  // threads'.
  std::vector<RunInfo> runs;
  std::unique_ptr<SplitTaker> split_taker;  // which parser read which splits, for the merge
};

// Fills the parse figures of `report` (runs, GPU analysis, stem cache, parse_seconds) and
// `read.bytes`. Throws the first failure of any thread, after every thread has stopped.
ParseOutput parse_inputs(const BuildPlan& plan, const PipelineOptions& options, const std::string& spill_dir,
                         DocTable& docs, ReadReport& read, PipelineReport& report,
                         const std::function<void(const PipelineProgress&)>& on_progress,
                         std::chrono::steady_clock::time_point build_start);

}  // namespace warp::pipeline
