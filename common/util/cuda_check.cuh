// CUDA error checking: every runtime call and every launch is checked; failures throw warp::Error
// with the call, file and line.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "common/util/status.hpp"

#define WARP_CUDA_CHECK(call)                                                                                          \
  do {                                                                                                                 \
    const cudaError_t warp_cuda_status = (call);                                                                       \
    if (warp_cuda_status != cudaSuccess) {                                                                             \
      throw ::warp::Error(std::string("CUDA error in ") + #call + " at " + __FILE__ + ":" + std::to_string(__LINE__) + \
                          ": " + cudaGetErrorString(warp_cuda_status));                                                \
    }                                                                                                                  \
  } while (0)

#define WARP_CUDA_CHECK_LAUNCH() WARP_CUDA_CHECK(cudaGetLastError())
