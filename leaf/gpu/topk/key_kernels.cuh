// The key kernels in front of the top-k selection (topk_select.cuh), shared by the single-query
// path and PARA batches: (score, docID) keys of AND candidates or of dense accumulators, counted
// into the selection's buckets. Static: each translation unit has its own copy.
#pragma once
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {

// Candidates with a score >= 0 are live (matched every term so far); `matches` counts them.
static __global__ void candidate_keys_kernel(uint32_t count, const uint32_t* docs, const float* scores, uint64_t* keys,
                                             uint32_t* buckets, unsigned long long* matches) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const bool live = scores[i] >= 0;
  const uint64_t key = live ? topk_key(scores[i], docs[i]) : 0;
  keys[i] = key;
  count_key(key, buckets);
  if (live) atomicAdd(matches, 1ull);
}

// Document doc_begin + i has accumulators[i]; BM25 of a matching term is > 0, so zero means no match.
static __global__ void accumulator_keys_kernel(uint32_t count, const float* accumulators, uint32_t doc_begin, uint64_t* keys,
                                               uint32_t* buckets) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float score = accumulators[i];
  const uint64_t key = score > 0 ? topk_key(score, doc_begin + i) : 0;
  keys[i] = key;
  count_key(key, buckets);
}

}  // namespace warp::gpu
