// Top-k selection over (score, docID) keys on the GPU: a bucket select before the sort. Key
// kernels also count keys into 4096 buckets by the 12 bits after the sign (scores are positive:
// exponent and 4 mantissa bits); one block finds the bucket that holds the k-th key by a suffix
// scan; only keys in or above it are compacted. Up to 4096 of them are sorted by one thread block
// and copied back with a single synchronisation; more go through a device radix sort.
// Sorting thousands of keys instead of every document is what makes OR top-k cheap.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "leaf/gpu/topk/topk_method.hpp"
#include "leaf/query/topk_queue.hpp"

namespace warp::gpu {

inline constexpr int kBucketBits = 12;
inline constexpr uint32_t kBuckets = 1u << kBucketBits;

// (score, docID) as one sortable key: higher score first, then smaller docID; 0 = no document.
__device__ __forceinline__ uint64_t topk_key(float score, uint32_t doc) {
  return (static_cast<uint64_t>(__float_as_uint(score)) << 32) | (0xFFFFFFFFu - doc);
}

__device__ __forceinline__ uint32_t key_bucket(uint64_t key) {
  return static_cast<uint32_t>(key >> (63 - kBucketBits));
}

__device__ __forceinline__ void count_key(uint64_t key, uint32_t* buckets) {
  if (key != 0) atomicAdd(&buckets[key_bucket(key)], 1u);
}

// The other method, Ding et al.'s multi-level max structure (§8.2): maxima of groups of 32 keys,
// of 32 maxima, ... up to one root; the top key is read at the root, its leaf cleared and the
// maxima on its path recomputed, k times, by one warp.

// Hits of keys (score bits, inverted docID), in the keys' order.
std::vector<Hit> keys_to_hits(const uint64_t* keys, size_t count);

struct TopkBuffers {
  size_t capacity = 0;
  uint64_t* keys = nullptr;      // written by the key kernels
  uint64_t* selected = nullptr;  // keys at or above the threshold bucket
  uint64_t* sorted = nullptr;
  uint32_t* buckets = nullptr;  // kBuckets counters, then the selection state; zeroed by reset()
  uint64_t* result = nullptr;   // device: [selected count, overflow flag, k best keys...]
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
  uint64_t* host_result = nullptr;  // pinned copy of `result`
  uint64_t* tree = nullptr;         // max-tree levels above the keys

  void allocate(size_t capacity);
  void release();
  void reset(cudaStream_t stream);  // before the key kernels of a query
  // The k best of keys[0..n), best first. Synchronises the stream.
  std::vector<Hit> select(uint32_t n, size_t k, cudaStream_t stream, TopkMethod method = TopkMethod::kBucketSelect);
  // The k best documents of dense score accumulators (a score > 0 is a match; document i is
  // doc_begin + i), by bucket select straight from the scores: a histogram pass (per-block shared
  // histograms), then a pass that compacts the keys above the threshold and zeroes every non-zero
  // accumulator, so the next query needs no memset and no key array is written. Synchronises.
  std::vector<Hit> select_accumulators(float* accumulators, uint32_t n, uint32_t doc_begin, size_t k,
                                       cudaStream_t stream);
  // The k best of candidate keys elsewhere: keys[0..*count) with their bucket counts, both in device
  // memory (the OR tiles write them); `max_count` bounds *count. Uses this object's selection state.
  // Synchronises.
  std::vector<Hit> select_candidates(const uint64_t* keys, const uint32_t* count, uint32_t max_count,
                                     const uint32_t* candidate_buckets, size_t k, cudaStream_t stream);

 private:
  std::vector<Hit> select_by_buckets(uint32_t n, size_t k, cudaStream_t stream);
  std::vector<Hit> sort_selected(size_t k, cudaStream_t stream);
  std::vector<Hit> select_by_max_tree(uint32_t n, size_t k, cudaStream_t stream);
};

}  // namespace warp::gpu
