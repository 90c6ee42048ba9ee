#include "indexer/pipeline/gpu_analysis_start.hpp"

#include <algorithm>

#include "common/util/status.hpp"

namespace warp::pipeline {

GpuAnalysisStart::GpuAnalysisStart(const BuildPlan& plan, const PipelineOptions& options, size_t stem_tokens,
                                   size_t device_run_postings, std::chrono::steady_clock::time_point build_start)
    : plan_(plan),
      build_start_(build_start),
      analyzers_(plan.parsers),
      failures_(plan.parsers),
      ready_(std::make_unique<std::atomic<bool>[]>(plan.parsers)),
      ready_seconds_(plan.parsers) {
  if (!options.gpu_analysis) return;
  started_ = std::async(std::launch::async, [this, &options, stem_tokens, device_run_postings] {
               set_up_all(options, stem_tokens, device_run_postings);
             }).share();
}

GpuAnalysisStart::~GpuAnalysisStart() {
  if (started_.valid()) started_.wait();  // the thread uses this object
}

void GpuAnalysisStart::mark_all_ready() {
  for (size_t t = 0; t < plan_.parsers; ++t) ready_[t].store(true, std::memory_order_release);
}

void GpuAnalysisStart::set_up_all(const PipelineOptions& options, size_t stem_tokens, size_t device_run_postings) {
  if (plan_.gpu_unused) {
    std::string why;
    const bool usable = gpu_analysis_available(options.gpu_device, &why);
    table_failed_ = !usable;
    mark_all_ready();
    if (!usable) throw Error("no GPU analysis: " + why);
    return;
  }
  try {
    table_ = std::make_shared<GpuTokenTable>(options.gpu_device, stem_tokens);
  } catch (...) {
    table_failed_ = true;
    mark_all_ready();
    throw;
  }
  for (size_t t = 0; t < plan_.parsers; ++t) {
    try {
      auto analyzer = std::make_unique<GpuAnalyzer>(*table_, options.build.analyzer.max_token_bytes);
      analyzer->reserve(plan_.chunk_bytes + plan_.chunk_bytes / 4);
      analyzer->warm_up();
      if (device_run_postings > 0) {
        try {
          analyzer->reserve_run(device_run_postings, stem_tokens, plan_.parsers);
        } catch (const std::exception&) {  // no room on the device: the host's lists take its postings
        }
      }
      analyzers_[t] = std::move(analyzer);
    } catch (const std::exception& e) {
      failures_[t] = e.what();
    }
    ready_seconds_[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start_).count();
    ready_[t].store(true, std::memory_order_release);
  }
}

std::unique_ptr<GpuAnalyzer> GpuAnalysisStart::take(size_t parser, std::string& why) {
  if (table_failed_) std::shared_future<void>(started_).get();  // no GPU at all: the build fails with the reason
  if (plan_.gpu_unused) return nullptr;
  if (analyzers_[parser] == nullptr)
    why = failures_[parser].empty() ? "the GPU analyzer could not be made" : failures_[parser];
  return std::move(analyzers_[parser]);
}

void GpuAnalysisStart::finish() {
  if (started_.valid()) started_.get();
}

double GpuAnalysisStart::ready_first() const { return *std::min_element(ready_seconds_.begin(), ready_seconds_.end()); }

double GpuAnalysisStart::ready_last() const { return *std::max_element(ready_seconds_.begin(), ready_seconds_.end()); }

}  // namespace warp::pipeline
