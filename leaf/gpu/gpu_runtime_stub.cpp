// gpu_available() for builds without CUDA: GPU tests and tools skip with this reason.
#include "leaf/gpu/gpu_runtime.hpp"

namespace warp::gpu {

bool gpu_available(std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA (nvcc was not found or WARP_ENABLE_CUDA=OFF)";
  return false;
}

std::string gpu_description() { return "none"; }

}  // namespace warp::gpu
