// Top-k selection over (score, docID) keys on the GPU: a bucket select before the sort. Key
// kernels also count keys into 4096 buckets by their top 12 bits (sign, exponent and 3 mantissa
// bits of the score); one small kernel finds the bucket that holds the k-th key; only keys in or
// above it are compacted and radix-sorted. Sorting thousands of keys instead of every document
// is what makes OR top-k cheap.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "leaf/query/topk_queue.hpp"

namespace warp::gpu {

inline constexpr int kBucketBits = 12;
inline constexpr uint32_t kBuckets = 1u << kBucketBits;

// (score, docID) as one sortable key: higher score first, then smaller docID; 0 = no document.
__device__ __forceinline__ uint64_t topk_key(float score, uint32_t doc) {
  return (static_cast<uint64_t>(__float_as_uint(score)) << 32) | (0xFFFFFFFFu - doc);
}

__device__ __forceinline__ void count_key(uint64_t key, uint32_t* buckets) {
  if (key != 0) atomicAdd(&buckets[key >> (64 - kBucketBits)], 1u);
}

struct TopkBuffers {
  size_t capacity = 0;
  uint64_t* keys = nullptr;       // written by the key kernels
  uint64_t* selected = nullptr;   // keys at or above the threshold bucket
  uint64_t* sorted = nullptr;
  uint32_t* buckets = nullptr;    // kBuckets counters, zeroed by reset()
  uint32_t* selected_count = nullptr;
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
  uint64_t* host_keys = nullptr;  // pinned, kMaxTopK
  uint32_t* host_count = nullptr; // pinned

  void allocate(size_t capacity);
  void release();
  void reset(cudaStream_t stream);  // before the key kernels of a query
  // The k best of keys[0..n), best first. Synchronises the stream.
  std::vector<Hit> select(uint32_t n, size_t k, cudaStream_t stream);
};

}  // namespace warp::gpu
