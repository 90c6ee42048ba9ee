// The kernels of a PARA batch's AND queries (Ao et al. §3.1, Ding et al. §8.1-8.2), as launchers:
// block selection for each term round's candidates, LRC lists probed compressed, and the batched
// top-k of every AND query at once. The kernels are in and_kernels.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "leaf/gpu/decode/task_decode.cuh"

namespace warp::gpu {

// The batched top-k of AND queries: each query's candidates are a segment of the candidate arrays.
struct AndSelection {
  uint32_t offset = 0, slots = 0, k = 0;  // staged by the host
  uint32_t selected = 0, cursor = 0;      // the device's: keys at or above the threshold, keys gathered
  uint64_t threshold = 0;
  uint32_t refine = 0, above = 0;  // a crowded k-th bucket (kNoRefine: none) and the keys above it
};
constexpr uint32_t kNoRefine = 0xFFFFFFFFu;

// Block selection for every live candidate whose query has a list in this round: the block that
// may hold its docID is marked for decoding (kProbe), or the candidate dropped past the list's end.
void launch_batch_select(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* query_of,
                         const int32_t* round_task, const Task* tasks, uint8_t* masks, bool search_compressed,
                         cudaStream_t stream);

// LRC lists searched compressed (Ao et al. Algorithm 1): each candidate looks its docID up in the
// list itself.
void launch_batch_probe_compressed(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* query_of,
                                   const int32_t* round_task, const Task* tasks, const float* norms, uint32_t doc_begin,
                                   cudaStream_t stream);

// Buffers of the batched AND top-k: `buckets` and `sub_buckets` zeroed, `any_refine` zeroed,
// `selection` staged (a row per query) before the launch.
struct AndTopkBuffers {
  uint64_t* keys;               // a key per candidate
  uint32_t* buckets;            // kBuckets per query
  uint32_t* sub_buckets;        // kBuckets per query, for a crowded k-th bucket
  unsigned long long* matches;  // a count per query
  AndSelection* selection;      // per query
  uint32_t* any_refine;         // one flag
  uint64_t* staging;            // kBlockSelectCapacity keys per query
  uint64_t* results;            // `row_stride` words per query: selected, overflow, keys...
};

// The top-k of each of `queries` AND queries over its segment of the `count` candidates, in six
// launches: keys counted into buckets, a threshold per query, a crowded bucket refined by the next
// 12 bits, the keys at or above it gathered, and a block sort per query into its result row.
void launch_and_topk(uint32_t count, uint32_t queries, const uint32_t* docs, const float* scores,
                     const uint32_t* query_of, const AndTopkBuffers& buffers, uint32_t row_stride, cudaStream_t stream);

}  // namespace warp::gpu
