#include "leaf/gpu/topk/key_kernels.cuh"

#include <algorithm>

#include "common/util/cuda_check.cuh"
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {
namespace {

constexpr uint32_t kThreads = 256;
uint32_t grid_for(uint32_t n) { return std::max(1u, (n + kThreads - 1) / kThreads); }

__global__ void candidate_keys_kernel(uint32_t count, const uint32_t* docs, const float* scores, uint64_t* keys,
                                      uint32_t* buckets, unsigned long long* matches) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const bool live = scores[i] > 0;  // -1: a term missed; 0: a document deleted under an overlay
  const uint64_t key = live ? topk_key(scores[i], docs[i]) : 0;
  keys[i] = key;
  count_key(key, buckets);
  if (live) atomicAdd(matches, 1ull);
}

__global__ void accumulator_keys_kernel(uint32_t count, const float* accumulators, uint32_t doc_begin, uint64_t* keys,
                                        uint32_t* buckets) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float score = accumulators[i];
  const uint64_t key = score > 0 ? topk_key(score, doc_begin + i) : 0;
  keys[i] = key;
  count_key(key, buckets);
}

}  // namespace

void launch_candidate_keys(uint32_t count, const uint32_t* docs, const float* scores, uint64_t* keys, uint32_t* buckets,
                           unsigned long long* matches, cudaStream_t stream) {
  candidate_keys_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, docs, scores, keys, buckets, matches);
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_accumulator_keys(uint32_t count, const float* accumulators, uint32_t doc_begin, uint64_t* keys,
                             uint32_t* buckets, cudaStream_t stream) {
  accumulator_keys_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, accumulators, doc_begin, keys, buckets);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
