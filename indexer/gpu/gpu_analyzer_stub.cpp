// The GPU analysis for builds without CUDA: never available.
#include "common/util/status.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/gpu/gpu_inverter.hpp"

namespace warp::pipeline {

struct GpuAnalyzer::State {};

bool gpu_analysis_available(int device, std::string* why) { return gpu_inverter_available(device, why); }

GpuTokenTable::GpuTokenTable(int device, size_t) : device_(device) {
  std::string why;
  gpu_analysis_available(device, &why);
  throw Error("no GPU analysis: " + why);
}
GpuTokenTable::~GpuTokenTable() = default;

GpuAnalyzer::GpuAnalyzer(GpuTokenTable& table, size_t max_token_bytes)
    : table_(table), max_token_bytes_(max_token_bytes) {
  throw Error("no GPU analysis: this build has no CUDA");
}
GpuAnalyzer::~GpuAnalyzer() = default;
void GpuAnalyzer::grow_text(size_t) {  // the fields the CUDA build's code uses, named once here
  (void)max_token_bytes_, (void)text_size_, (void)text_capacity_, (void)started_, (void)inverting_, (void)stem_bound_,
      (void)run_distinct_, (void)run_fetched_;
}
void GpuAnalyzer::begin_chunk() {}
void GpuAnalyzer::add_document(std::string_view, std::string_view) {}
void GpuAnalyzer::learn(std::string_view, uint32_t) {}
void GpuAnalyzer::start() { throw Error("no GPU analysis: this build has no CUDA"); }
void GpuAnalyzer::finish() {}
void GpuAnalyzer::reserve(size_t) {}
void GpuAnalyzer::warm_up() {}
void GpuAnalyzer::start_invert(uint32_t) { throw Error("no GPU analysis: this build has no CUDA"); }
void GpuAnalyzer::finish_invert() {}
void GpuAnalyzer::reserve_run(size_t, size_t, size_t) { throw Error("no GPU analysis: this build has no CUDA"); }
bool GpuAnalyzer::append_to_run(uint32_t) { return false; }
void GpuAnalyzer::sort_run(std::vector<uint32_t>&, std::vector<uint32_t>&) {
  throw Error("no GPU analysis: this build has no CUDA");
}
void GpuAnalyzer::order_run(const std::vector<uint32_t>&) { throw Error("no GPU analysis: this build has no CUDA"); }
void GpuAnalyzer::order_run_stems(std::vector<uint32_t>&, std::vector<uint64_t>&) {
  throw Error("no GPU analysis: this build has no CUDA");
}
void GpuAnalyzer::write_noted_prefixes() {}
const uint32_t* GpuAnalyzer::fetch_run(size_t, size_t) { throw Error("no GPU analysis: this build has no CUDA"); }

}  // namespace warp::pipeline
