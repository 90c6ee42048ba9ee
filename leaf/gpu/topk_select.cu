#include "leaf/gpu/topk_select.cuh"

#include <cstring>
#include <cub/device/device_radix_sort.cuh>

#include "leaf/gpu/cuda_check.cuh"
#include "leaf/query/query_processor.hpp"

namespace warp::gpu {
namespace {

// One thread walks the buckets from the top until k keys are covered; the threshold is the lowest
// key of that bucket (1 when fewer than k keys exist: every real key is >= 1).
__global__ void threshold_kernel(const uint32_t* buckets, uint32_t k, uint64_t* threshold) {
  uint64_t covered = 0;
  for (int b = kBuckets - 1; b >= 0; --b) {
    covered += buckets[b];
    if (covered >= k) {
      *threshold = b == 0 ? 1 : static_cast<uint64_t>(b) << (64 - kBucketBits);
      return;
    }
  }
  *threshold = 1;
}

__global__ void compact_kernel(const uint64_t* keys, uint32_t n, const uint64_t* threshold, uint64_t* selected,
                               uint32_t* count) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && keys[i] >= *threshold) selected[atomicAdd(count, 1u)] = keys[i];
}

}  // namespace

void TopkBuffers::allocate(size_t n) {
  capacity = std::max<size_t>(1, n);
  WARP_CUDA_CHECK(cudaMalloc(&keys, capacity * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&selected, capacity * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&sorted, capacity * sizeof(uint64_t)));
  // buckets, then the threshold key (8-byte aligned), then the selected count
  WARP_CUDA_CHECK(cudaMalloc(&buckets, kBuckets * sizeof(uint32_t) + 2 * sizeof(uint64_t)));
  selected_count = buckets + kBuckets + 2;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(nullptr, sort_temp_bytes, selected, sorted,
                                                           static_cast<int>(capacity)));
  WARP_CUDA_CHECK(cudaMalloc(&sort_temp, std::max<size_t>(1, sort_temp_bytes)));
  WARP_CUDA_CHECK(cudaMallocHost(&host_keys, kMaxTopK * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMallocHost(&host_count, sizeof(uint32_t)));
}

void TopkBuffers::release() {
  cudaFree(keys), cudaFree(selected), cudaFree(sorted), cudaFree(buckets), cudaFree(sort_temp);
  cudaFreeHost(host_keys), cudaFreeHost(host_count);
}

void TopkBuffers::reset(cudaStream_t stream) {
  WARP_CUDA_CHECK(cudaMemsetAsync(buckets, 0, kBuckets * sizeof(uint32_t) + 2 * sizeof(uint64_t), stream));
}

std::vector<Hit> TopkBuffers::select(uint32_t n, size_t k, cudaStream_t stream) {
  std::vector<Hit> hits;
  if (n == 0 || k == 0) return hits;
  auto* threshold = reinterpret_cast<uint64_t*>(buckets + kBuckets);
  threshold_kernel<<<1, 1, 0, stream>>>(buckets, static_cast<uint32_t>(k), threshold);
  WARP_CUDA_CHECK_LAUNCH();
  compact_kernel<<<(n + 255) / 256, 256, 0, stream>>>(keys, n, threshold, selected, selected_count);
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cudaMemcpyAsync(host_count, selected_count, sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const uint32_t count = *host_count;
  if (count == 0) return hits;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(sort_temp, sort_temp_bytes, selected, sorted,
                                                           static_cast<int>(count), 0, 64, stream));
  const size_t take = std::min<size_t>(k, count);
  WARP_CUDA_CHECK(cudaMemcpyAsync(host_keys, sorted, take * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < take; ++i) {
    const uint32_t score_bits = static_cast<uint32_t>(host_keys[i] >> 32);
    float score;
    std::memcpy(&score, &score_bits, sizeof score);
    hits.push_back({0xFFFFFFFFu - static_cast<uint32_t>(host_keys[i]), score});
  }
  return hits;
}

}  // namespace warp::gpu
