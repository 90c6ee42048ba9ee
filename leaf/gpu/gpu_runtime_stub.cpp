// gpu_available() for builds without CUDA: GPU tests and tools skip with this reason.
#include "leaf/gpu/gpu_runtime.hpp"

#include "common/util/status.hpp"

namespace warp::gpu {

bool gpu_available(std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA (nvcc was not found or WARP_ENABLE_CUDA=OFF)";
  return false;
}

std::string gpu_description() { return "none"; }

int gpu_device_count() { return 0; }

std::unique_ptr<QueryProcessor> make_gpu_processor(const IndexView&, const GpuSettings&) {
  std::string why;
  gpu_available(&why);
  throw Error("no GPU query processor: " + why);
}

}  // namespace warp::gpu
