// `warp-indexer build`: documents → partitions of one generation + manifest, with progress.
#pragma once
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"
#include "indexer/pipeline/parallel_builder.hpp"

namespace warp {

struct BuildCommandOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  BuildOptions build;
  pipeline::PipelineOptions pipeline;  // threads, batch size, memory budget (its `build` is ignored)
  bool progress = true;
};

// Returns the process exit code; prints progress, the rejected records and a summary to stderr.
int run_build_command(const BuildCommandOptions& options);

}  // namespace warp
