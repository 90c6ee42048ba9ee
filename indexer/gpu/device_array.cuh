// A device array that only grows (its contents are not kept), for the indexer's GPU work.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "common/util/cuda_check.cuh"

namespace warp::pipeline {

template <typename T>
struct DeviceArray {
  T* data = nullptr;
  size_t capacity = 0;
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void reserve(size_t n) {
    if (n <= capacity) return;
    if (data != nullptr) cudaFree(data);
    data = nullptr;
    capacity = std::max<size_t>(n, capacity + capacity / 2);
    WARP_CUDA_CHECK(cudaMalloc(&data, capacity * sizeof(T)));
  }
  ~DeviceArray() {
    if (data != nullptr) cudaFree(data);
  }
};

}  // namespace warp::pipeline
