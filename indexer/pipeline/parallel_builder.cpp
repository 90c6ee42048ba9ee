#include "indexer/pipeline/parallel_builder.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "common/index/index_files.hpp"
#include "common/util/status.hpp"
#include "indexer/pipeline/assemble_stage.hpp"
#include "indexer/pipeline/build_plan.hpp"
#include "indexer/pipeline/merge_stage.hpp"
#include "indexer/pipeline/parse_stage.hpp"

namespace warp::pipeline {
namespace {
namespace fs = std::filesystem;

// A build's directories: the spill directory (created; removed at the end, whatever happens) and
// the partitions' (created; removed unless the build completes).
class BuildSpace {
 public:
  BuildSpace(const std::string& out_dir, const std::string& spill_dir)
      : out_dir_(out_dir),
        spill_dir_(spill_dir.empty()
                       ? (fs::temp_directory_path() / ("warp-runs-" + std::to_string(::getpid()))).string()
                       : spill_dir) {
    fs::create_directories(spill_dir_);
  }
  ~BuildSpace() {
    std::error_code ignored;
    fs::remove_all(spill_dir_, ignored);
    if (keep_) return;
    for (const std::string& dir : partitions_) fs::remove_all(dir, ignored);
  }
  BuildSpace(const BuildSpace&) = delete;
  BuildSpace& operator=(const BuildSpace&) = delete;

  const std::string& spill_dir() const { return spill_dir_; }
  // The partitions' directories, created; refuses one that exists.
  const std::vector<std::string>& create_partitions(uint32_t parts) {
    for (uint32_t p = 0; p < parts; ++p) {
      const std::string dir = (fs::path(out_dir_) / partition_dir_name(p)).string();
      if (fs::exists(dir)) throw Error("partition " + dir + " already exists; refusing to overwrite it");
      fs::create_directories(dir);
      partitions_.push_back(dir);
    }
    return partitions_;
  }
  void keep_partitions() { keep_ = true; }

 private:
  std::string out_dir_, spill_dir_;
  std::vector<std::string> partitions_;
  bool keep_ = false;
};

PipelineReport report_of(const BuildPlan& plan) {
  PipelineReport report;
  report.parsers_index = plan.parsers_index;
  report.parsers = plan.parsers, report.indexers = plan.indexers, report.backend_threads = plan.threads;
  report.chunk_bytes = plan.chunk_bytes;
  report.splits = plan.splits.size();
  report.gpu_analysis_unused = plan.gpu_unused;
  report.gpu_analysis_bytes_per_parser = plan.bytes_per_parser;
  return report;
}

}  // namespace

size_t merge_concurrency(uint64_t budget, uint64_t runs, size_t threads, uint64_t open_files) {
  runs = std::max<uint64_t>(runs, 1);
  const uint64_t by_memory = budget / (4 * runs * kMinMergeBuffer);
  const uint64_t by_files = open_files > kFilesSpared ? (open_files - kFilesSpared) / runs : 0;
  return static_cast<size_t>(std::clamp<uint64_t>(std::min(by_memory, by_files), 1, std::max<size_t>(threads, 1)));
}

// The stages in turn: plan (plan_build), parse (parse_inputs), merge (merge_runs), assemble
// (assemble_partitions). Declared in this order, the spill and the merge's open partitions are
// closed before BuildSpace removes what a failed or empty build leaves.
PipelineReport build_index(const std::vector<std::string>& inputs, const PipelineOptions& options,
                           const std::string& out_dir, ReadReport& read,
                           const std::function<void(const PipelineProgress&)>& on_progress) {
  const auto start = std::chrono::steady_clock::now();
  const BuildPlan plan = plan_build(inputs, options);
  if (fs::exists(fs::path(out_dir) / kManifestName))
    throw Error("index " + out_dir + " already exists; refusing to overwrite it");
  PipelineReport report = report_of(plan);
  BuildSpace space(out_dir, options.spill_dir);
  DocTable docs(space.spill_dir() + "/documents", options.build.keeps_sources());
  const ParseOutput parsed = parse_inputs(plan, options, space.spill_dir(), docs, read, report, on_progress, start);
  const std::vector<std::string>& partition_dirs = space.create_partitions(options.build.partitions);
  MergeOutput merged = merge_runs(plan, options, docs, parsed, partition_dirs, read, report);
  if (report.documents == 0) return report;  // no partition: BuildSpace removes their directories
  assemble_partitions(plan, docs, merged, out_dir, report);
  docs.remove_spill();
  space.keep_partitions();
  return report;
}

}  // namespace warp::pipeline
