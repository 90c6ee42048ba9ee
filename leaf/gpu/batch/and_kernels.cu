#include "leaf/gpu/batch/and_kernels.cuh"

#include <algorithm>

#include "common/util/cuda_check.cuh"
#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/intersect/block_select.cuh"
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {
namespace {

// Block selection for every live candidate whose query has a list in this round: the block that
// may hold its docID is marked for decoding (kProbe), or the candidate dropped past the list's end.
__global__ void batch_select_kernel(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* query_of,
                                    const int32_t* round_task, const Task* tasks, uint8_t* masks,
                                    bool search_compressed) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || scores[i] < 0) return;
  const int32_t t = round_task[query_of[i]];
  if (t < 0) return;
  const Task& task = tasks[t];
  if (search_compressed && is_lrc(task.list.codec)) return;
  const uint32_t block = block_for_doc(task.list.block_last_docid, task.list.block_count, docs[i]);
  if (block == task.list.block_count) {
    scores[i] = -1;
    return;
  }
  masks[task.mask_offset + block] = 1;
}

// LRC lists searched compressed (Ao et al. Algorithm 1): each candidate looks its docID up in the
// list itself; the other lists' candidates are probed where their blocks are decoded (kProbe).
__global__ void batch_probe_compressed_kernel(uint32_t count, const uint32_t* docs, float* scores,
                                              const uint32_t* query_of, const int32_t* round_task, const Task* tasks,
                                              const float* norms, uint32_t doc_begin) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || scores[i] < 0) return;
  const int32_t t = round_task[query_of[i]];
  if (t < 0) return;
  const Task& task = tasks[t];
  if (!is_lrc(task.list.codec)) return;
  const uint32_t doc = docs[i];
  const uint32_t freq = lrc_frequency(task.list, doc);
  if (freq == 0) {
    scores[i] = -1;
  } else {
    scores[i] += bm25_units_dev(task.weight, freq, norms[doc - doc_begin]);
  }
}

// 1. Every candidate's key; live ones counted into their query's buckets and matches. A query's
// matches pile into a few buckets, so a warp's live lanes add to each bucket once (one atomic per
// distinct bucket: per candidate, the atomics on a few addresses took ~0.45 ms a batch of 32
// GOV2-like queries), and to the matches once when they are all one query's (a query's candidates
// are one segment, so nearly every warp).
__global__ void and_keys_kernel(uint32_t count, const uint32_t* docs, const float* scores, const uint32_t* query_of,
                                uint64_t* keys, uint32_t* buckets, unsigned long long* matches) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = i < count && scores[i] > 0;  // -1: a term missed; 0: deleted under an overlay
  const uint32_t query = live ? query_of[i] : 0xFFFFFFFFu;
  const uint64_t key = live ? topk_key(scores[i], docs[i]) : 0;
  if (i < count) keys[i] = key;
  const uint32_t live_lanes = __ballot_sync(0xFFFFFFFFu, live);
  if (live_lanes == 0) return;                                                    // uniform: most warps hold no match
  const uint32_t slot = live ? query * kBuckets + key_bucket(key) : 0xFFFFFFFFu;  // query < 2^20
  const uint32_t same_slot = __match_any_sync(0xFFFFFFFFu, slot);
  if (live && (threadIdx.x & 31u) == static_cast<uint32_t>(__ffs(same_slot) - 1))
    atomicAdd(&buckets[slot], __popc(same_slot));
  const uint32_t leader = __ffs(live_lanes) - 1;
  const uint32_t leader_query = __shfl_sync(0xFFFFFFFFu, query, leader);
  if (__all_sync(0xFFFFFFFFu, !live || query == leader_query)) {
    if ((threadIdx.x & 31u) == leader) atomicAdd(&matches[leader_query], __popc(live_lanes));
  } else if (live) {
    atomicAdd(&matches[query], 1ull);
  }
}

// 2. One thread block per query: the bucket of its k-th best key, as a threshold. When more keys
// than one block sort holds lie at or above it (scores piled in that bucket), the bucket is marked
// for refinement (2b, 2c), as the OR tiles find θ.
__global__ void __launch_bounds__(kBlockSelectThreads)
    and_threshold_kernel(AndSelection* selection, const uint32_t* buckets, uint32_t* any_refine) {
  AndSelection& s = selection[blockIdx.x];
  if (s.slots == 0 || s.k == 0) {  // uniform
    if (threadIdx.x == 0) s.selected = 0, s.cursor = 0, s.threshold = ~0ull, s.refine = kNoRefine;
    return;
  }
  const uint32_t* counts = buckets + size_t{blockIdx.x} * kBuckets;
  uint32_t selected;
  const uint64_t threshold = block_threshold<kBlockSelectThreads>(counts, s.k, selected);
  if (threadIdx.x == 0) {
    s.selected = selected, s.cursor = 0, s.threshold = threshold, s.refine = kNoRefine;
    if (selected > kBlockSelectCapacity && threshold > 1) {
      const uint32_t bucket = key_bucket(threshold);
      s.refine = bucket, s.above = selected - counts[bucket];
      *any_refine = 1;
    }
  }
}

// 2b. Over every candidate (the whole grid, not a block per query: a query has up to millions):
// the keys in their query's crowded bucket counted by their next 12 bits.
__global__ void and_refine_count_kernel(uint32_t count, const uint64_t* keys, const uint32_t* query_of,
                                        const AndSelection* selection, const uint32_t* any_refine,
                                        uint32_t* sub_buckets) {
  if (*any_refine == 0) return;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const uint64_t key = keys[i];
  if (key == 0) return;
  const uint32_t query = query_of[i];
  if (key_bucket(key) != selection[query].refine) return;
  atomicAdd(
      &sub_buckets[size_t{query} * kBuckets + (static_cast<uint32_t>(key >> (63 - 2 * kBucketBits)) & (kBuckets - 1))],
      1u);
}

// 2c. One thread block per query with a crowded bucket: the threshold moves to the sub-bucket of
// the k-th best.
__global__ void __launch_bounds__(kBlockSelectThreads)
    and_refine_threshold_kernel(AndSelection* selection, const uint32_t* sub_buckets) {
  AndSelection& s = selection[blockIdx.x];
  if (s.refine == kNoRefine) return;  // uniform
  const uint32_t* sub = sub_buckets + size_t{blockIdx.x} * kBuckets;
  uint32_t sub_bucket, sub_above;
  find_rank<kBlockSelectThreads>(sub, s.k - s.above, sub_bucket, sub_above);
  if (threadIdx.x == 0) {
    s.threshold |= static_cast<uint64_t>(sub_bucket) << (63 - 2 * kBucketBits);
    s.selected = s.above + sub_above + sub[sub_bucket];
  }
}

// 3. Over every candidate: the keys at or above their query's threshold gathered per query (none
// for a query with more than one block sort holds: its fallback selects again).
__global__ void and_gather_kernel(uint32_t count, const uint64_t* keys, const uint32_t* query_of,
                                  AndSelection* selection, uint64_t* staging) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || keys[i] == 0) return;
  AndSelection& s = selection[query_of[i]];
  if (s.selected <= kBlockSelectCapacity && keys[i] >= s.threshold) {
    staging[size_t{query_of[i]} * kBlockSelectCapacity + atomicAdd(&s.cursor, 1u)] = keys[i];
  }
}

// 4. One thread block per query: its gathered keys sorted, the k best into its result row
// [selected, overflow, keys...].
__global__ void __launch_bounds__(kBlockSelectThreads)
    and_sort_kernel(const AndSelection* selection, const uint64_t* staging, uint64_t* results, uint32_t stride) {
  const AndSelection& s = selection[blockIdx.x];
  uint64_t* row = results + size_t{blockIdx.x} * stride;
  const bool overflow = s.selected > kBlockSelectCapacity;
  if (threadIdx.x == 0) row[0] = s.selected, row[1] = overflow;
  if (overflow || s.selected == 0) return;  // uniform
  block_sort_top(staging + size_t{blockIdx.x} * kBlockSelectCapacity, min(s.selected, s.cursor), min(s.k, stride - 2),
                 row + 2);
}

constexpr uint32_t kThreads = 256;
uint32_t grid_for(uint64_t n) { return static_cast<uint32_t>(std::max<uint64_t>(1, (n + kThreads - 1) / kThreads)); }

}  // namespace

void launch_batch_select(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* query_of,
                         const int32_t* round_task, const Task* tasks, uint8_t* masks, bool search_compressed,
                         cudaStream_t stream) {
  batch_select_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, docs, scores, query_of, round_task, tasks, masks,
                                                                search_compressed);
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_batch_probe_compressed(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* query_of,
                                   const int32_t* round_task, const Task* tasks, const float* norms, uint32_t doc_begin,
                                   cudaStream_t stream) {
  batch_probe_compressed_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, docs, scores, query_of, round_task,
                                                                          tasks, norms, doc_begin);
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_and_topk(uint32_t count, uint32_t queries, const uint32_t* docs, const float* scores,
                     const uint32_t* query_of, const AndTopkBuffers& b, uint32_t row_stride, cudaStream_t stream) {
  if (count > 0) {
    and_keys_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, docs, scores, query_of, b.keys, b.buckets,
                                                              b.matches);
    WARP_CUDA_CHECK_LAUNCH();
  }
  and_threshold_kernel<<<queries, kBlockSelectThreads, 0, stream>>>(b.selection, b.buckets, b.any_refine);
  WARP_CUDA_CHECK_LAUNCH();
  if (count > 0) {
    and_refine_count_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, b.keys, query_of, b.selection,
                                                                      b.any_refine, b.sub_buckets);
    WARP_CUDA_CHECK_LAUNCH();
  }
  and_refine_threshold_kernel<<<queries, kBlockSelectThreads, 0, stream>>>(b.selection, b.sub_buckets);
  WARP_CUDA_CHECK_LAUNCH();
  if (count > 0) {
    and_gather_kernel<<<grid_for(count), kThreads, 0, stream>>>(count, b.keys, query_of, b.selection, b.staging);
    WARP_CUDA_CHECK_LAUNCH();
  }
  and_sort_kernel<<<queries, kBlockSelectThreads, 0, stream>>>(b.selection, b.staging, b.results, row_stride);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
