// Median time of a GPU operation with CUDA events: one warm-up run, then `repetitions` timed runs.
#pragma once
#include <algorithm>
#include <vector>

#include "common/util/cuda_check.cuh"

namespace warp::gpu {

template <class Launch>
double median_event_ms(Launch&& launch, int repetitions, cudaStream_t stream = nullptr) {
  cudaEvent_t start, stop;
  WARP_CUDA_CHECK(cudaEventCreate(&start));
  WARP_CUDA_CHECK(cudaEventCreate(&stop));
  launch();  // warm-up
  std::vector<float> times;
  for (int r = 0; r < repetitions; ++r) {
    WARP_CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    WARP_CUDA_CHECK(cudaEventRecord(stop, stream));
    WARP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    WARP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace warp::gpu
