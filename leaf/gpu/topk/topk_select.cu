#include "leaf/gpu/topk/topk_select.cuh"

#include <algorithm>
#include <cstring>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "common/util/cuda_check.cuh"
#include "leaf/query/query_processor.hpp"

namespace warp::gpu {
namespace {

constexpr int kScanThreads = 1024;
constexpr int kBucketsPerThread = kBuckets / kScanThreads;
constexpr int kSmallSortThreads = 512;
constexpr int kSmallSortItems = 8;  // 4096 keys: 32 KiB of shared memory for the sort
constexpr uint32_t kSmallSortCapacity = kSmallSortThreads * kSmallSortItems;

struct SelectionState {
  uint64_t threshold;
  uint32_t selected;
};

// Suffix scan of the bucket counts (highest bucket first): the bucket where the running count
// reaches k gives the threshold key; with fewer than k keys, every key (>= 1) is selected.
__global__ void __launch_bounds__(kScanThreads)
    threshold_kernel(const uint32_t* buckets, uint32_t k, SelectionState* state) {
  using Scan = cub::BlockScan<uint32_t, kScanThreads>;
  __shared__ typename Scan::TempStorage storage;
  uint32_t counts[kBucketsPerThread], running[kBucketsPerThread];
  for (int i = 0; i < kBucketsPerThread; ++i) counts[i] = buckets[kBuckets - 1 - (threadIdx.x * kBucketsPerThread + i)];
  uint32_t total;
  Scan(storage).InclusiveSum(counts, running, total);
  if (threadIdx.x == 0 && total < k) state->threshold = 1;
  for (int i = 0; i < kBucketsPerThread; ++i) {
    if (running[i] >= k && running[i] - counts[i] < k) {
      const uint32_t bucket = kBuckets - 1 - (threadIdx.x * kBucketsPerThread + i);
      state->threshold = bucket == 0 ? 1 : static_cast<uint64_t>(bucket) << (63 - kBucketBits);
    }
  }
}

__global__ void compact_kernel(const uint64_t* keys, uint32_t n, SelectionState* state, uint64_t* selected) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && keys[i] >= state->threshold) selected[atomicAdd(&state->selected, 1u)] = keys[i];
}

constexpr int kHistogramThreads = 512;

__global__ void __launch_bounds__(kHistogramThreads)
    accumulator_histogram_kernel(const float* accumulators, uint32_t n, uint32_t* buckets) {
  __shared__ uint32_t local[kBuckets];
  for (uint32_t b = threadIdx.x; b < kBuckets; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const uint32_t quads = n / 4;
  const auto* vec = reinterpret_cast<const float4*>(accumulators);
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
    const float4 v = vec[q];
    for (float s : {v.x, v.y, v.z, v.w}) {
      if (s > 0) atomicAdd(&local[key_bucket(topk_key(s, 0))], 1u);
    }
  }
  for (uint32_t i = quads * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (accumulators[i] > 0) atomicAdd(&local[key_bucket(topk_key(accumulators[i], 0))], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < kBuckets; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&buckets[b], local[b]);
  }
}

__global__ void accumulator_compact_kernel(float* accumulators, uint32_t n, uint32_t doc_begin, SelectionState* state,
                                           uint64_t* selected) {
  const uint64_t threshold = state->threshold;
  const uint32_t quads = n / 4;
  auto* vec = reinterpret_cast<float4*>(accumulators);
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
    const float4 v = vec[q];
    if (v.x > 0 || v.y > 0 || v.z > 0 || v.w > 0) {
      const float s[4] = {v.x, v.y, v.z, v.w};
      for (int j = 0; j < 4; ++j) {
        const uint64_t key = s[j] > 0 ? topk_key(s[j], doc_begin + q * 4 + j) : 0;
        if (key != 0 && key >= threshold) selected[atomicAdd(&state->selected, 1u)] = key;
      }
      vec[q] = make_float4(0, 0, 0, 0);
    }
  }
  for (uint32_t i = quads * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float s = accumulators[i];
    if (s > 0) {
      const uint64_t key = topk_key(s, doc_begin + i);
      if (key >= threshold) selected[atomicAdd(&state->selected, 1u)] = key;
      accumulators[i] = 0;
    }
  }
}

__global__ void compact_counted_kernel(const uint64_t* keys, const uint32_t* count, SelectionState* state,
                                       uint64_t* selected) {
  const uint32_t n = *count;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (keys[i] >= state->threshold) selected[atomicAdd(&state->selected, 1u)] = keys[i];
  }
}

// Sorts up to kSmallSortCapacity selected keys in one thread block and writes the k best to
// result[2..]; result[0] = selected count, result[1] = 1 when there were too many to sort here.
__global__ void __launch_bounds__(kSmallSortThreads)
    small_sort_kernel(const uint64_t* selected, const SelectionState* state, uint32_t k, uint64_t* result) {
  const uint32_t count = state->selected;
  if (threadIdx.x == 0) result[0] = count, result[1] = count > kSmallSortCapacity;
  if (count > kSmallSortCapacity) return;
  using Sort = cub::BlockRadixSort<uint64_t, kSmallSortThreads, kSmallSortItems>;
  __shared__ typename Sort::TempStorage storage;
  uint64_t keys[kSmallSortItems];
  for (int i = 0; i < kSmallSortItems; ++i) {
    const uint32_t index = threadIdx.x * kSmallSortItems + i;
    keys[i] = index < count ? selected[index] : 0;
  }
  Sort(storage).SortDescending(keys);  // blocked arrangement: thread t holds ranks t*items..
  for (int i = 0; i < kSmallSortItems; ++i) {
    const uint32_t rank = threadIdx.x * kSmallSortItems + i;
    if (rank < k && rank < count) result[2 + rank] = keys[i];
  }
}

constexpr uint32_t kDegree = 32;  // one warp reads a node's children

// Level l+1 holds the maximum of each group of 32 keys of level l.
__global__ void max_level_kernel(const uint64_t* level, uint32_t size, uint64_t* parent, uint32_t parent_size) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= parent_size) return;
  uint64_t best = 0;
  for (uint32_t i = g * kDegree; i < min(size, (g + 1) * kDegree); ++i) best = max(best, level[i]);
  parent[g] = best;
}

__device__ uint64_t warp_max(uint64_t v) {
  for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// One warp extracts the k largest keys: read the root, descend to the leaf that holds it (the
// child equal to its parent), clear the leaf, recompute the maxima on the way back up.
__global__ void max_tree_extract_kernel(uint64_t* keys, uint64_t* tree, const uint32_t* level_offsets,
                                        const uint32_t* level_sizes, int levels, uint32_t k, uint64_t* result) {
  const uint32_t lane = threadIdx.x;
  auto level_ptr = [&](int l) { return l == 0 ? keys : tree + level_offsets[l]; };
  uint32_t extracted = 0;
  for (; extracted < k; ++extracted) {
    const uint64_t top = level_ptr(levels - 1)[0];
    if (top == 0) break;
    if (lane == 0) result[2 + extracted] = top;
    uint32_t index = 0;
    for (int l = levels - 2; l >= 0; --l) {  // descend
      const uint32_t child = index * kDegree + lane;
      const uint64_t v = child < level_sizes[l] ? level_ptr(l)[child] : 0;
      const uint32_t hit = __ballot_sync(0xFFFFFFFFu, v == top);
      index = index * kDegree + (__ffs(hit) - 1);
    }
    if (lane == 0) keys[index] = 0;
    __syncwarp();
    for (int l = 1; l < levels; ++l) {  // recompute the path
      const uint32_t parent = index / kDegree;
      const uint32_t child = parent * kDegree + lane;
      const uint64_t v = child < level_sizes[l - 1] ? level_ptr(l - 1)[child] : 0;
      const uint64_t best = warp_max(v);
      if (lane == 0) level_ptr(l)[parent] = best;
      __syncwarp();
      index = parent;
    }
  }
  if (lane == 0) result[0] = extracted, result[1] = 0;
}

}  // namespace

std::vector<Hit> keys_to_hits(const uint64_t* keys, size_t count) {
  std::vector<Hit> hits;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t score_bits = static_cast<uint32_t>(keys[i] >> 32);
    float score;
    std::memcpy(&score, &score_bits, sizeof score);
    hits.push_back({0xFFFFFFFFu - static_cast<uint32_t>(keys[i]), score});
  }
  return hits;
}

void TopkBuffers::allocate(size_t n) {
  capacity = std::max<size_t>(32, n);  // the max tree borrows `sorted` for 128 bytes of level sizes
  WARP_CUDA_CHECK(cudaMalloc(&keys, capacity * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&selected, capacity * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&sorted, capacity * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&buckets, kBuckets * sizeof(uint32_t) + sizeof(SelectionState)));
  WARP_CUDA_CHECK(cudaMalloc(&result, (2 + kMaxTopK) * sizeof(uint64_t)));
  WARP_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeysDescending(nullptr, sort_temp_bytes, selected, sorted, static_cast<int>(capacity)));
  WARP_CUDA_CHECK(cudaMalloc(&sort_temp, std::max<size_t>(1, sort_temp_bytes)));
  WARP_CUDA_CHECK(cudaMallocHost(&host_result, (2 + kMaxTopK) * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMalloc(&tree, (capacity / (kDegree - 1) + 16) * sizeof(uint64_t)));
}

void TopkBuffers::release() {
  cudaFree(keys), cudaFree(selected), cudaFree(sorted), cudaFree(buckets), cudaFree(result), cudaFree(sort_temp);
  cudaFreeHost(host_result);
  cudaFree(tree);
}

void TopkBuffers::reset(cudaStream_t stream) {
  WARP_CUDA_CHECK(cudaMemsetAsync(buckets, 0, kBuckets * sizeof(uint32_t) + sizeof(SelectionState), stream));
}

std::vector<Hit> TopkBuffers::select(uint32_t n, size_t k, cudaStream_t stream, TopkMethod method) {
  if (n == 0 || k == 0) return {};
  return method == TopkMethod::kMaxTree ? select_by_max_tree(n, k, stream) : select_by_buckets(n, k, stream);
}

std::vector<Hit> TopkBuffers::select_by_max_tree(uint32_t n, size_t k, cudaStream_t stream) {
  // Level sizes and offsets (level 0 is `keys`), small enough to pass through the result buffer.
  uint32_t sizes[16], offsets[16];
  int levels = 1;
  sizes[0] = n, offsets[0] = 0;
  uint32_t used = 0;
  while (sizes[levels - 1] > 1) {
    sizes[levels] = (sizes[levels - 1] + kDegree - 1) / kDegree;
    offsets[levels] = used;
    used += sizes[levels];
    ++levels;
  }
  for (int l = 1; l < levels; ++l) {
    max_level_kernel<<<(sizes[l] + 255) / 256, 256, 0, stream>>>(l == 1 ? keys : tree + offsets[l - 1], sizes[l - 1],
                                                                 tree + offsets[l], sizes[l]);
    WARP_CUDA_CHECK_LAUNCH();
  }
  auto* level_info = reinterpret_cast<uint32_t*>(sorted);  // scratch: sizes and offsets for the kernel
  std::memcpy(host_result, offsets, sizeof offsets);
  std::memcpy(reinterpret_cast<char*>(host_result) + sizeof offsets, sizes, sizeof sizes);
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(level_info, host_result, sizeof offsets + sizeof sizes, cudaMemcpyHostToDevice, stream));
  max_tree_extract_kernel<<<1, 32, 0, stream>>>(keys, tree, level_info, level_info + 16, levels,
                                                static_cast<uint32_t>(k), result);
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cudaMemcpyAsync(host_result, result, (2 + k) * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return keys_to_hits(host_result + 2, static_cast<size_t>(host_result[0]));
}

std::vector<Hit> TopkBuffers::select_by_buckets(uint32_t n, size_t k, cudaStream_t stream) {
  auto* state = reinterpret_cast<SelectionState*>(buckets + kBuckets);
  threshold_kernel<<<1, kScanThreads, 0, stream>>>(buckets, static_cast<uint32_t>(k), state);
  WARP_CUDA_CHECK_LAUNCH();
  compact_kernel<<<(n + 255) / 256, 256, 0, stream>>>(keys, n, state, selected);
  WARP_CUDA_CHECK_LAUNCH();
  return sort_selected(k, stream);
}

std::vector<Hit> TopkBuffers::select_accumulators(float* accumulators, uint32_t n, uint32_t doc_begin, size_t k,
                                                  cudaStream_t stream) {
  auto* state = reinterpret_cast<SelectionState*>(buckets + kBuckets);
  if (n == 0) return {};
  int sms = 0, device = 0;
  WARP_CUDA_CHECK(cudaGetDevice(&device));
  WARP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const uint32_t grid =
      std::min<uint32_t>(static_cast<uint32_t>(sms) * 4, (n / 4 + kHistogramThreads - 1) / kHistogramThreads + 1);
  accumulator_histogram_kernel<<<grid, kHistogramThreads, 0, stream>>>(accumulators, n, buckets);
  WARP_CUDA_CHECK_LAUNCH();
  threshold_kernel<<<1, kScanThreads, 0, stream>>>(buckets, static_cast<uint32_t>(std::max<size_t>(k, 1)), state);
  WARP_CUDA_CHECK_LAUNCH();
  accumulator_compact_kernel<<<grid * 2, 256, 0, stream>>>(accumulators, n, doc_begin, state, selected);
  WARP_CUDA_CHECK_LAUNCH();
  if (k == 0) {
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return {};
  }
  return sort_selected(k, stream);
}

std::vector<Hit> TopkBuffers::select_candidates(const uint64_t* candidate_keys, const uint32_t* count,
                                                uint32_t max_count, const uint32_t* candidate_buckets, size_t k,
                                                cudaStream_t stream) {
  if (k == 0 || max_count == 0) return {};
  auto* state = reinterpret_cast<SelectionState*>(buckets + kBuckets);
  reset(stream);  // the selection state
  threshold_kernel<<<1, kScanThreads, 0, stream>>>(candidate_buckets, static_cast<uint32_t>(k), state);
  WARP_CUDA_CHECK_LAUNCH();
  const uint32_t grid = std::min<uint32_t>(1024, (max_count + 255) / 256);
  compact_counted_kernel<<<grid, 256, 0, stream>>>(candidate_keys, count, state, selected);
  WARP_CUDA_CHECK_LAUNCH();
  return sort_selected(k, stream);
}

std::vector<Hit> TopkBuffers::sort_selected(size_t k, cudaStream_t stream) {
  auto* state = reinterpret_cast<SelectionState*>(buckets + kBuckets);
  small_sort_kernel<<<1, kSmallSortThreads, 0, stream>>>(selected, state, static_cast<uint32_t>(k), result);
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cudaMemcpyAsync(host_result, result, (2 + std::min<size_t>(k, kSmallSortCapacity)) * sizeof(uint64_t),
                                  cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const uint32_t count = static_cast<uint32_t>(host_result[0]);
  const size_t take = std::min<size_t>(k, count);
  if (host_result[1] == 0) return keys_to_hits(host_result + 2, take);
  // Too many keys for one block (k near 10,000 or scores piled in one bucket): a device sort.
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(sort_temp, sort_temp_bytes, selected, sorted,
                                                           static_cast<int>(count), 0, 64, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(host_result + 2, sorted, take * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return keys_to_hits(host_result + 2, take);
}

}  // namespace warp::gpu
