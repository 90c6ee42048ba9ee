// The GPU inverter for builds without CUDA: never available.
#include "common/util/status.hpp"
#include "indexer/gpu/gpu_inverter.hpp"

namespace warp::pipeline {

struct GpuInverter::State {};

bool gpu_inverter_available(int, std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA (nvcc was not found or WARP_ENABLE_CUDA=OFF)";
  return false;
}

GpuInverter::GpuInverter(int device, unsigned) {
  std::string why;
  gpu_inverter_available(device, &why);
  throw Error("no GPU indexer: " + why);
}

GpuInverter::~GpuInverter() = default;

void GpuInverter::invert(const std::vector<PieceEntry>&, const std::string&, InvertedBatch&) {
  throw Error("no GPU indexer: this build has no CUDA");
}

}  // namespace warp::pipeline
