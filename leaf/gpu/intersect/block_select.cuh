// Top-k of one query's keys by one thread block, for selections batched one thread block per
// query (the OR tiles, PARA batches of AND queries): the bucket of the k-th best key from the
// keys' histogram (topk_select.cuh's 4096 buckets), the keys at or above it gathered and sorted in
// the block. More than kBlockSelectCapacity such keys (k near 10,000, or ties) is an overflow the
// caller resolves with TopkBuffers::select_candidates.
#pragma once
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {

inline constexpr uint32_t kBlockSelectThreads = 512, kBlockSelectItems = 8;
inline constexpr uint32_t kBlockSelectCapacity = kBlockSelectThreads * kBlockSelectItems;

// The bucket of counts[0..kBuckets) (highest bucket = best) that holds the rank-th best (rank >= 1)
// and how many lie above it; false when there are fewer than rank (`total`, when given, gets the
// sum of the counts). Every thread of the block calls it.
template <int THREADS>
__device__ bool find_rank(const uint32_t* counts, uint32_t rank, uint32_t& bucket, uint32_t& above,
                          uint32_t* total_out = nullptr) {
  constexpr int kPer = kBuckets / THREADS;
  using Scan = cub::BlockScan<uint32_t, THREADS>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ uint32_t found_bucket, found_above;
  uint32_t c[kPer], running[kPer];
  for (int i = 0; i < kPer; ++i) c[i] = counts[kBuckets - 1 - (threadIdx.x * kPer + i)];
  uint32_t total;
  Scan(storage).InclusiveSum(c, running, total);
  for (int i = 0; i < kPer; ++i) {
    if (running[i] >= rank && running[i] - c[i] < rank) {
      found_bucket = kBuckets - 1 - (threadIdx.x * kPer + i);
      found_above = running[i] - c[i];
    }
  }
  __syncthreads();
  bucket = found_bucket, above = found_above;
  if (total_out != nullptr) *total_out = total;  // the block aggregate, in every thread
  __syncthreads();                               // the storage may be used again
  return total >= rank;
}

// The threshold key of the k-th best among keys counted in `buckets` (the lower edge of its
// bucket; 1, every key, when there are fewer than k or the k-th is in bucket 0) and how many keys
// are at or above it. Every thread of a THREADS-thread block calls it.
template <int THREADS>
__device__ uint64_t block_threshold(const uint32_t* buckets, uint32_t k, uint32_t& selected) {
  uint32_t bucket, above, total;
  if (find_rank<THREADS>(buckets, k, bucket, above, &total) && bucket > 0) {
    selected = above + buckets[bucket];
    return static_cast<uint64_t>(bucket) << (63 - kBucketBits);
  }
  selected = total;
  return 1;
}

// Sorts stage[0..count) (count <= kBlockSelectCapacity) and writes the k best, best first, to
// out[0..min(k, count)). Every thread of a kBlockSelectThreads-thread block calls it.
__device__ inline void block_sort_top(const uint64_t* stage, uint32_t count, uint32_t k, uint64_t* out) {
  using SmallSort = cub::BlockRadixSort<uint64_t, kBlockSelectThreads, 1>;
  using Sort = cub::BlockRadixSort<uint64_t, kBlockSelectThreads, kBlockSelectItems>;
  __shared__ union {
    typename SmallSort::TempStorage small;
    typename Sort::TempStorage full;
  } sort_storage;
  if (count <= kBlockSelectThreads) {  // the usual case for small k: one key a thread, a cheaper sort
    uint64_t key[1] = {threadIdx.x < count ? stage[threadIdx.x] : 0};
    SmallSort(sort_storage.small).SortDescending(key);
    if (threadIdx.x < k && threadIdx.x < count) out[threadIdx.x] = key[0];
    return;
  }
  uint64_t sorted[kBlockSelectItems];
  for (uint32_t i = 0; i < kBlockSelectItems; ++i) {
    const uint32_t index = threadIdx.x * kBlockSelectItems + i;
    sorted[i] = index < count ? stage[index] : 0;
  }
  Sort(sort_storage.full).SortDescending(sorted);  // blocked: thread t holds ranks t * items ..
  for (uint32_t i = 0; i < kBlockSelectItems; ++i) {
    const uint32_t rank = threadIdx.x * kBlockSelectItems + i;
    if (rank < k && rank < count) out[rank] = sorted[i];
  }
}

// The k best of keys[0..n) (0 = no document) whose histogram is `buckets`, best first, into
// out[0..min(k, selected)); `selected` gets how many keys were at or above the k-th best's bucket.
// `stage`: kBlockSelectCapacity keys of global scratch. Returns false (out untouched) when
// selected > kBlockSelectCapacity. Every thread of a kBlockSelectThreads-thread block calls it.
// For few keys: one thread block reads them all.
__device__ inline bool block_select(const uint64_t* keys, uint32_t n, const uint32_t* buckets, uint32_t k,
                                    uint64_t* stage, uint64_t* out, uint32_t& selected) {
  const uint64_t threshold = block_threshold<kBlockSelectThreads>(buckets, k, selected);
  if (selected > kBlockSelectCapacity) return false;  // uniform
  __shared__ uint32_t cursor;
  if (threadIdx.x == 0) cursor = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += kBlockSelectThreads) {
    if (keys[i] >= threshold) stage[atomicAdd(&cursor, 1u)] = keys[i];
  }
  __syncthreads();
  block_sort_top(stage, min(selected, cursor), k, out);
  return true;
}

}  // namespace warp::gpu
