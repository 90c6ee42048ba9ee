// The OR tiles' engine (or_tiles.hpp), shared by its files: the run's constants and records, the
// bound inputs and the device helpers that both the bound kernels (or_tiles_bounds.cu) and the
// scoring kernels (or_tiles_score.cu) use, and the launchers that or_tiles.cu calls. Private to
// leaf/gpu/or_tiles.
#pragma once
#include <cuda_runtime.h>

#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/intersect/block_select.cuh"
#include "leaf/gpu/or_tiles/or_tiles.hpp"

namespace warp::gpu::or_tiles_engine {

inline constexpr uint32_t kTile = OrTiles::kTileDocs;
// Block maxima are the CPU's float arithmetic and a GPU score sums in another order: a tile is
// skipped only when its bound is below θ by more than rounding can explain.
inline constexpr float kBoundSlack = 1.0f + 1e-4f;
inline constexpr uint32_t kPlanThreads = 1024;
inline constexpr uint32_t kSortThreads = kBlockSelectThreads, kSortCapacity = kBlockSelectCapacity;
inline constexpr uint32_t kHeader =
    7;  // a result row: selected, overflow, blocks, postings, tiles scored, θ bits, keys kept; then the best keys
inline constexpr uint32_t kQueryBits = 8;  // a second-pass work item: query << 24 | tile
inline constexpr uint32_t kTileMask = (1u << (32 - kQueryBits)) - 1;

// A run's sizes, in device memory (copied with its inputs), so that a run's launches can be one
// CUDA graph instantiated once: grids sized for the most queries, blocks past `queries` exit.
struct RunSizes {
  uint32_t queries, sparse, sparse_blocks, result_stride;
};

struct EngineQuery {
  uint32_t list_begin, list_count, k, dense_lists;  // dense: not decoded whole into the sparse postings
  uint32_t floor_bits;                              // OrTileQuery::floor as float bits: θ is never below it
};

// A short list without slice maxima of its own (DeviceIndex keeps them for the long lists):
// decoded whole at query time, its exact maximum per slice goes to row `slot` of the sparse maxima.
struct SparseList {
  DeviceList list;
  uint32_t block_begin;  // first thread block of the launch that decodes it
  uint32_t slot;
  uint32_t query;
  float weight;
};

// Fewer postings than a quarter of the slices: cheaper to decode than to bound by block maxima.
inline bool is_sparse(const DeviceList& list, uint32_t slices) {
  return list.slice_max == nullptr && uint64_t{list.count} * 4 < slices;
}

inline constexpr uint32_t kSlicesPerTile = kTile / kSliceDocs;
static_assert(kSlicesPerTile == 32, "a warp's lanes are a tile's slices");

inline constexpr uint32_t kDenseList = 0xFFFFFFFFu;

// Rounds of pass 2, each with θ recomputed from every candidate so far (or_tiles.cu plans them).
inline constexpr uint32_t kRounds = 8;

struct QueryScratch {  // per query, zeroed before each run
  Counters counters;
  uint32_t bound_buckets[kBuckets];  // tiles by upper bound
  uint32_t key_buckets[kBuckets];    // candidates by key
  uint32_t key_count;
  uint32_t first_count;
  uint32_t theta_bits;  // θ as float bits: every candidate kept by pass 2 scores at least θ
  uint32_t tiles_scored;
  // Per round of pass 2 (WARP_GPU_STAGE_TIMES reports them): its θ, its tiles, and the blocks
  // decoded before it.
  uint32_t round_theta_bits[kRounds];
  uint32_t round_tiles[kRounds];
  unsigned long long blocks_before_round[kRounds];
};

__device__ __forceinline__ uint32_t float_bucket(float score) { return key_bucket(topk_key(score, 0)); }

// The sparse lists' postings, decoded and scored once per run: a tile reads its few postings of
// such a list from here (from tile_start[tile] to tile_start[tile + 1]) instead of decoding the
// block that holds them, which spans many tiles.
struct SparsePostings {
  uint32_t* docs;  // per slot, `capacity` postings in list order
  float* scores;
  uint32_t* tile_start;  // per slot, `tiles`: the first posting at or after each tile's first document
  uint32_t capacity, tiles;
};

// A bound of one list's scores in slice `slice` of the partition, in the query's units: its slice
// maxima, the exact maxima of a sparse list, or else the largest block-max among the blocks
// overlapping the slice (stored bounds scaled by `bound_scale`).
__device__ inline float list_slice_bound(const DeviceList& list, float bound_scale, uint32_t sparse_slot,
                                         const uint32_t* sparse_maxima, uint32_t slices, uint32_t slice,
                                         uint32_t doc_begin, uint32_t doc_count) {
  if (list.slice_max != nullptr) return unit_bound_dev(list.slice_max[slice] * list.slice_scale, bound_scale);
  if (sparse_slot != kDenseList) return __uint_as_float(sparse_maxima[size_t{sparse_slot} * slices + slice]);
  const uint32_t first = doc_begin + slice * kSliceDocs;
  const uint32_t last = doc_begin + min((slice + 1) * kSliceDocs, doc_count) - 1;
  float best = 0;
  for (uint32_t b = block_for_doc(list.block_last_docid, list.block_count, first); b < list.block_count; ++b) {
    if (b > 0 && list.block_last_docid[b - 1] >= last) break;  // block b starts after the slice
    best = fmaxf(best, list.block_max_score[b]);
    if (list.block_last_docid[b] >= last) break;
  }
  return unit_bound_dev(best, bound_scale);
}

struct BoundInputs {
  const DeviceList* lists;
  const uint32_t* sparse_slots;   // per list: its row of sparse maxima, or kDenseList
  const float* bound_scales;      // per list: its stored bounds into the query's units
  const uint32_t* sparse_maxima;  // float bits, slices per row
  uint32_t slices, doc_begin, doc_count;
  SparsePostings sparse;
  float* slice_bounds;  // per query, tile and slice: the bounds of tile_bound_kernel
};

// Lane i of a warp: the bound of slice i of `tile`, summed over the query's lists.
__device__ inline float slice_bound(const EngineQuery& q, const BoundInputs& in, uint32_t tile, uint32_t lane) {
  const uint32_t slice = tile * kSlicesPerTile + lane;
  if (slice >= in.slices) return 0;
  float bound = 0;
  for (uint32_t l = 0; l < q.list_count; ++l) {
    const uint32_t at = q.list_begin + l;
    bound += list_slice_bound(in.lists[at], in.bound_scales[at], in.sparse_slots[at], in.sparse_maxima, in.slices,
                              slice, in.doc_begin, in.doc_count);
  }
  return bound;
}

inline constexpr uint32_t kMaxStages = 8;  // non-essential lists per tile at most (the smallest bounds)
struct StageOptions {
  uint32_t min_items;  // a stage of fewer blocks in the tile is scored with the essential lists
};

// The kernels' launchers (or_tiles_bounds.cu, or_tiles_score.cu), in the order a run launches
// them (or_tiles.cu); `block_size` picks the kernel compiled for the lists' blocks (128 or 256).
void launch_sparse_maxima(uint32_t block_size, uint32_t grid, const SparseList* sparse, const RunSizes* sizes,
                          const float* norms, uint32_t doc_begin, uint32_t slices, uint32_t* sparse_maxima,
                          SparsePostings out, QueryScratch* scratch, cudaStream_t stream);
void launch_tile_bounds(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, const BoundInputs& in,
                        uint32_t tiles, float* bounds, QueryScratch* scratch, cudaStream_t stream);
void launch_plan(uint32_t queries, const RunSizes* sizes, float* bounds, uint32_t tiles, uint32_t capacity,
                 uint32_t* first_tiles, QueryScratch* scratch, cudaStream_t stream);
void launch_first_pass(uint32_t block_size, dim3 grid, const EngineQuery* queries, const RunSizes* sizes,
                       const BoundInputs& in, const float* weights, const float* norms, const uint32_t* first_tiles,
                       uint32_t capacity, uint64_t* keys, size_t key_stride, QueryScratch* scratch,
                       cudaStream_t stream);
void launch_theta(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, float* bounds, uint32_t round,
                  uint32_t rank, uint32_t tiles, const uint64_t* keys, size_t key_stride, uint32_t* second_tiles,
                  uint32_t* second_total, QueryScratch* scratch, cudaStream_t stream);
void launch_second_pass(uint32_t block_size, uint32_t grid, const EngineQuery* queries, const BoundInputs& in,
                        const float* weights, const float* norms, const uint32_t* second_tiles,
                        const uint32_t* second_total, uint64_t* keys, size_t key_stride, bool staged,
                        StageOptions stage_options, QueryScratch* scratch, cudaStream_t stream);
void launch_select(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, const uint64_t* keys,
                   size_t key_stride, uint64_t* staging, const QueryScratch* scratch, uint64_t* results,
                   cudaStream_t stream);
// Thread blocks of the second pass resident per multiprocessor, for blocks of 128 and of 256.
void second_pass_occupancy(int& per_sm_128, int& per_sm_256);

}  // namespace warp::gpu::or_tiles_engine
