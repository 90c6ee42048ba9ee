// OR top-k without global accumulators. Dense per-document accumulators (Ding et al. §8.3) cost
// three passes over 4 bytes × N documents per query (zero, histogram, compact) plus a scattered
// atomic per posting in global memory; on a 25M-document partition that traffic, not decoding,
// bounds throughput. Here the query's lists are decoded once into (docID, BM25) arrays (one launch
// for all of them), the position of every tile boundary in every list is found by a binary search
// each (one launch), and one thread block owns a tile of kOrTile consecutive documents: it adds
// the scores of its documents' postings into the tile's accumulators in shared memory, then keeps only the
// tile's own top-k candidates: a shared histogram of the tile's scores by the 12 key bits of
// topk_select, the bucket where the k-th best falls, and a block-wide compaction of the keys at or
// above it. A document's score is complete inside its tile, so the global top-k is among the
// candidates; the tiles' histograms of the kept buckets feed the usual bucket select over them.
// blockIdx.y is the query: a PARA batch is one launch. When the decoded postings would not fit
// their buffer, the tiles decode the blocks overlapping them themselves (bounds == nullptr).
#pragma once
#include <cub/block/block_scan.cuh>

#include "leaf/gpu/list_decode.cuh"
#include "leaf/gpu/task_decode.cuh"
#include "leaf/gpu/topk_select.cuh"

namespace warp::gpu {

inline constexpr uint32_t kOrTile = 4096;  // documents per tile: 16 KiB of scores, 16 KiB of histogram

struct OrQueryTask {
  uint32_t list_begin = 0;   // into the lists and weights arrays
  uint32_t list_count = 0;
  uint32_t k = 0;
  uint64_t* keys = nullptr;     // candidates out (capacity: the partition's documents)
  uint32_t* count = nullptr;    // candidates written
  uint32_t* buckets = nullptr;  // kBuckets counters of the candidates' keys
  Counters* counters = nullptr;
  const uint32_t* bounds = nullptr;  // per list (tiles + 1) positions in the decoded arrays; null: decode in the tile
};

// bounds[l * (tiles + 1) + t]: the position in the decoded arrays of list l's first docID of tile t
// (for t = tiles, the list's end).
inline __global__ void tile_bounds_kernel(const Task* tasks, uint32_t list_count, const uint32_t* docs, uint32_t doc_begin,
                                          uint32_t doc_count, uint32_t tiles, uint32_t* bounds) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t per_list = tiles + 1;
  if (i >= list_count * per_list) return;
  const Task& task = tasks[i / per_list];
  const uint32_t tile = i % per_list;
  const uint32_t target = doc_begin + min(tile * kOrTile, doc_count);
  const uint32_t* list_docs = docs + task.out_offset;
  uint32_t lo = 0, hi = task.list.count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (list_docs[mid] < target) lo = mid + 1; else hi = mid;
  }
  bounds[i] = task.out_offset + lo;
}

// THREADS per tile; BS: the codec block size when the tiles may decode themselves (THREADS == BS),
// 0 when the lists always come decoded.
template <int THREADS, int BS>
__global__ void __launch_bounds__(THREADS) or_tiles_kernel(const OrQueryTask* tasks, const DeviceList* lists, const float* weights,
                                                      const uint32_t* decoded_docs, const float* decoded_scores,
                                                      const float* norms, uint32_t doc_begin, uint32_t doc_count) {
  static_assert(kBuckets % THREADS == 0);
  constexpr uint32_t kPerThread = kBuckets / THREADS;
  constexpr bool kDecodeHere = THREADS == BS;
  using Scan = cub::BlockScan<uint32_t, THREADS>;
  __shared__ float scores[kOrTile];
  __shared__ uint32_t histogram[kBuckets];
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint64_t threshold;
  __shared__ uint32_t base;
  const OrQueryTask task = tasks[blockIdx.y];
  const uint32_t tid = threadIdx.x;
  const uint32_t tile_first = blockIdx.x * kOrTile;  // relative to doc_begin
  const uint32_t tile_end = min(tile_first + kOrTile, doc_count);
  for (uint32_t i = tid; i < kOrTile; i += THREADS) scores[i] = 0;
  for (uint32_t b = tid; b < kBuckets; b += THREADS) histogram[b] = 0;
  __syncthreads();
  uint32_t blocks = 0, postings = 0;
  if (task.bounds != nullptr) {
    for (uint32_t l = 0; l < task.list_count; ++l) {
      const uint32_t* row = task.bounds + (task.list_begin + l) * (gridDim.x + 1);
      const uint32_t end = row[blockIdx.x + 1];
      for (uint32_t i = row[blockIdx.x] + tid; i < end; i += THREADS) {
        atomicAdd(&scores[decoded_docs[i] - doc_begin - tile_first], decoded_scores[i]);
      }
    }
  }
  if constexpr (kDecodeHere) {
  __shared__ BlockDecodeStorage<BS> storage;
  for (uint32_t l = 0; task.bounds == nullptr && l < task.list_count; ++l) {
    const DeviceList& list = lists[task.list_begin + l];
    const float weight = weights[task.list_begin + l];
    const uint32_t first = block_for_doc(list.block_last_docid, list.block_count, doc_begin + tile_first);
    const uint32_t last = block_for_doc(list.block_last_docid, list.block_count, doc_begin + tile_end - 1);
    for (uint32_t block = first; block <= last && block < list.block_count; ++block) {  // uniform over the block
      const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
      uint32_t doc, freq;
      decode_postings<BS>(list, block, n, storage, doc, freq);
      const uint32_t local = doc - doc_begin;
      if (tid < n && local >= tile_first && local < tile_end) {
        atomicAdd(&scores[local - tile_first], bm25_dev(weight, freq, norms[local]));
      }
      __syncthreads();  // decode_postings reuses its storage
      ++blocks, postings += n;
    }
  }
  }
  __syncthreads();
  // The tile's histogram of non-zero scores.
  for (uint32_t i = tid; i < kOrTile; i += THREADS) {
    if (scores[i] > 0) atomicAdd(&histogram[key_bucket(topk_key(scores[i], 0))], 1u);
  }
  __syncthreads();
  // The bucket where the tile's k-th best falls: thread t owns buckets from the top, kPerThread each.
  uint32_t mine = 0;
  for (uint32_t j = 0; j < kPerThread; ++j) mine += histogram[kBuckets - 1 - (tid * kPerThread + j)];
  uint32_t above, total;
  Scan(scan_storage).ExclusiveSum(mine, above, total);
  if (tid == 0) threshold = 1;  // fewer than k scores: keep them all
  __syncthreads();
  if (total >= task.k && above < task.k && above + mine >= task.k) {
    uint32_t running = above;
    for (uint32_t j = 0; j < kPerThread; ++j) {
      const uint32_t bucket = kBuckets - 1 - (tid * kPerThread + j);
      running += histogram[bucket];
      if (running >= task.k) {
        threshold = bucket == 0 ? 1 : static_cast<uint64_t>(bucket) << (63 - kBucketBits);
        break;
      }
    }
  }
  __syncthreads();
  // Compact the tile's keys at or above the threshold: one global atomic per tile for the offset.
  uint32_t keep = 0;
  for (uint32_t i = tid; i < kOrTile; i += THREADS) {
    keep += scores[i] > 0 && topk_key(scores[i], doc_begin + tile_first + i) >= threshold;
  }
  uint32_t offset, kept;
  __syncthreads();
  Scan(scan_storage).ExclusiveSum(keep, offset, kept);
  if (tid == 0) base = kept == 0 ? 0 : atomicAdd(task.count, kept);
  __syncthreads();
  for (uint32_t i = tid; i < kOrTile; i += THREADS) {
    if (scores[i] > 0) {
      const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
      if (key >= threshold) task.keys[base + offset++] = key;
    }
  }
  const uint32_t first_bucket = key_bucket(threshold);
  for (uint32_t b = first_bucket + tid; b < kBuckets; b += THREADS) {
    if (histogram[b] != 0) atomicAdd(&task.buckets[b], histogram[b]);
  }
  if (tid == 0 && task.counters != nullptr && blocks != 0) {
    atomicAdd(&task.counters->blocks_decoded, static_cast<unsigned long long>(blocks));
    atomicAdd(&task.counters->postings_decoded, static_cast<unsigned long long>(postings));
  }
}

inline uint32_t or_tile_count(uint32_t doc_count) { return (doc_count + kOrTile - 1) / kOrTile; }

// Device buffers of the decode pass: tasks (one per list), decoded postings, tile bounds.
struct OrDecodeBuffers {
  Task* tasks = nullptr;
  Task* host_tasks = nullptr;  // pinned
  uint32_t* docs = nullptr;
  float* scores = nullptr;
  uint32_t* bounds = nullptr;
  size_t list_capacity = 0, slot_capacity = 0;
};

// Stages one task per list (lists[0..list_count) with their weights), and when their slots fit,
// decodes them all and finds the tile bounds; returns the bounds for OrQueryTask::bounds, or
// nullptr when the tiles must decode themselves.
// `host_query` (optional) gives each list's query, for the per-query counters.
inline const uint32_t* or_decode_pass(OrDecodeBuffers& b, const DeviceList* host_lists, const float* host_weights,
                                      const uint32_t* host_query, uint32_t list_count, const float* norms,
                                      uint32_t doc_begin, uint32_t doc_count, Counters* counters, cudaStream_t stream) {
  if (list_count == 0 || list_count > b.list_capacity) return nullptr;
  uint32_t blocks = 0;
  size_t slots = 0;
  for (uint32_t l = 0; l < list_count; ++l) {
    b.host_tasks[l] = {host_lists[l], blocks, static_cast<uint32_t>(slots), 0, host_query ? host_query[l] : 0, host_weights[l]};
    blocks += host_lists[l].block_count;
    slots += size_t{host_lists[l].block_count} * host_lists[l].block_size;
  }
  if (slots > b.slot_capacity) return nullptr;
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.tasks, b.host_tasks, list_count * sizeof(Task), cudaMemcpyHostToDevice, stream));
  if (host_lists[0].block_size == 256) {
    launch_decode_tasks<256>(b.tasks, list_count, blocks, nullptr, TaskOutput::kScored, b.docs, nullptr, b.scores, nullptr,
                             nullptr, 0, norms, doc_begin, counters, stream);
  } else {
    launch_decode_tasks<128>(b.tasks, list_count, blocks, nullptr, TaskOutput::kScored, b.docs, nullptr, b.scores, nullptr,
                             nullptr, 0, norms, doc_begin, counters, stream);
  }
  const uint32_t tiles = or_tile_count(doc_count);
  const uint32_t threads = list_count * (tiles + 1);
  tile_bounds_kernel<<<(threads + 255) / 256, 256, 0, stream>>>(b.tasks, list_count, b.docs, doc_begin, doc_count, tiles, b.bounds);
  WARP_CUDA_CHECK_LAUNCH();
  return b.bounds;
}

// `decoded`: or_decode_pass gave bounds (the tiles read decoded postings, 256 threads each);
// otherwise every task's bounds are null and the tiles decode, one thread per posting of a block.
inline void launch_or_tiles(const OrQueryTask* tasks, uint32_t query_count, const DeviceList* lists, const float* weights,
                            const OrDecodeBuffers& buffers, bool decoded, uint32_t block_size, const float* norms,
                            uint32_t doc_begin, uint32_t doc_count, cudaStream_t stream) {
  const dim3 grid(or_tile_count(doc_count), query_count);
  const uint32_t* docs = buffers.docs;
  const float* scores = buffers.scores;
  if (decoded) {
    or_tiles_kernel<256, 0><<<grid, 256, 0, stream>>>(tasks, lists, weights, docs, scores, norms, doc_begin, doc_count);
  } else if (block_size == 256) {
    or_tiles_kernel<256, 256><<<grid, 256, 0, stream>>>(tasks, lists, weights, docs, scores, norms, doc_begin, doc_count);
  } else {
    or_tiles_kernel<128, 128><<<grid, 128, 0, stream>>>(tasks, lists, weights, docs, scores, norms, doc_begin, doc_count);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

inline void allocate_or_decode(OrDecodeBuffers& b, size_t lists, size_t slots, uint32_t doc_count) {
  b.list_capacity = lists, b.slot_capacity = slots;
  WARP_CUDA_CHECK(cudaMalloc(&b.tasks, std::max<size_t>(1, lists) * sizeof(Task)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_tasks, std::max<size_t>(1, lists) * sizeof(Task)));
  WARP_CUDA_CHECK(cudaMalloc(&b.docs, std::max<size_t>(1, slots) * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMalloc(&b.scores, std::max<size_t>(1, slots) * sizeof(float)));
  WARP_CUDA_CHECK(cudaMalloc(&b.bounds, std::max<size_t>(1, lists * (or_tile_count(doc_count) + 1)) * sizeof(uint32_t)));
}

inline void free_or_decode(OrDecodeBuffers& b) {
  cudaFree(b.tasks), cudaFreeHost(b.host_tasks), cudaFree(b.docs), cudaFree(b.scores), cudaFree(b.bounds);
  b = OrDecodeBuffers{};
}

}  // namespace warp::gpu
