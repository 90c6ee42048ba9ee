// --gpu-analysis: the GPU's token table and every parser's analyzer, made on a thread of their own
// beside the parsers, which analyze their first chunks on the CPU and each take their analyzer as
// soon as it is ready. The CUDA context is made first (a few hundred ms), then the analyzers'
// streams, pinned and device buffers and kernels one after another. (Made by the parsers
// themselves, the allocations and first launches had queued on the driver's and the kernel's
// locks: 16 threads ran at half speed for 0.3 s of a 3 s build. The last is ready ~0.2 s after the
// first; four threads making them were no sooner: the driver serializes them.) An analyzer that
// cannot be made is that parser's GPU failure; no GPU at all fails the build.
#pragma once
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/pipeline/build_plan.hpp"

namespace warp::pipeline {

class GpuAnalysisStart {
 public:
  // Starts setting up (only where `options.gpu_analysis`): a table of `stem_tokens` tokens, and
  // where `device_run_postings` > 0 a run of that many postings on the device for each parser
  // (skipped where the device has no room: the host's lists take its postings).
  GpuAnalysisStart(const BuildPlan& plan, const PipelineOptions& options, size_t stem_tokens,
                   size_t device_run_postings, std::chrono::steady_clock::time_point build_start);
  ~GpuAnalysisStart();
  GpuAnalysisStart(const GpuAnalysisStart&) = delete;
  GpuAnalysisStart& operator=(const GpuAnalysisStart&) = delete;

  // Whether parser `parser`'s analyzer (or why there is none) is ready to take.
  bool ready(size_t parser) const { return ready_[parser].load(std::memory_order_acquire); }
  // Once ready: parser `parser`'s analyzer, or null with `why` (empty where the plan leaves the GPU
  // unused). Throws, with the reason, where no GPU could be used at all.
  std::unique_ptr<GpuAnalyzer> take(size_t parser, std::string& why);
  // After the parsers: rethrows why the GPU could not start, if it could not.
  void finish();
  // Seconds into the build at which the first and the last parser's analyzer was ready.
  double ready_first() const;
  double ready_last() const;

 private:
  void set_up_all(const PipelineOptions& options, size_t stem_tokens, size_t device_run_postings);
  void mark_all_ready();

  const BuildPlan& plan_;
  std::chrono::steady_clock::time_point build_start_;
  std::shared_ptr<GpuTokenTable> table_;
  std::vector<std::unique_ptr<GpuAnalyzer>> analyzers_;  // by parser; taken by each
  std::vector<std::string> failures_;                    // by parser: why its analyzer is missing
  std::unique_ptr<std::atomic<bool>[]> ready_;           // by parser: its analyzer (or failure) is set
  std::atomic<bool> table_failed_{false};
  std::vector<double> ready_seconds_;  // by parser
  std::shared_future<void> started_;
};

}  // namespace warp::pipeline
