#include "leaf/gpu/gpu_runtime.hpp"

#include <cuda_runtime.h>

#include <cstdio>

namespace warp::gpu {

bool gpu_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why != nullptr) *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA-capable device";
    cudaGetLastError();  // clear the sticky error
    return false;
  }
  return true;
}

int gpu_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string gpu_description() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown device";
  char text[512];
  std::snprintf(text, sizeof text, "%s, %.1f GiB, %d SMs, compute capability %d.%d", prop.name,
                prop.totalGlobalMem / double(1ull << 30), prop.multiProcessorCount, prop.major, prop.minor);
  return text;
}

}  // namespace warp::gpu
