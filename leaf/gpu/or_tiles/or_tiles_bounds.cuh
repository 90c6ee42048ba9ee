// The OR tiles' bounds (or_tiles.hpp): the run's constants and per-query records, the sparse
// lists' exact slice maxima, tile and slice bounds, the plan of the first pass, and θ with the
// second pass's work list. Kernels for or_tiles.cu only (its one includer).
#pragma once
#include <cub/block/block_scan.cuh>

#include "leaf/gpu/intersect/block_select.cuh"
#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/or_tiles/or_tiles.hpp"

namespace warp::gpu {
namespace {

constexpr uint32_t kTile = OrTiles::kTileDocs;
// Block maxima are the CPU's float arithmetic and a GPU score sums in another order: a tile is
// skipped only when its bound is below θ by more than rounding can explain.
constexpr float kBoundSlack = 1.0f + 1e-4f;
constexpr uint32_t kPlanThreads = 1024;
constexpr uint32_t kSortThreads = kBlockSelectThreads, kSortCapacity = kBlockSelectCapacity;
constexpr uint32_t kHeader =
    7;  // a result row: selected, overflow, blocks, postings, tiles scored, θ bits, keys kept; then the best keys
constexpr uint32_t kQueryBits = 8;  // a second-pass work item: query << 24 | tile
constexpr uint32_t kTileMask = (1u << (32 - kQueryBits)) - 1;

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
bool is_sparse(const DeviceList& list, uint32_t slices) {
  return list.slice_max == nullptr && uint64_t{list.count} * 4 < slices;
}

constexpr uint32_t kSlicesPerTile = kTile / kSliceDocs;
static_assert(kSlicesPerTile == 32, "a warp's lanes are a tile's slices");

constexpr uint32_t kDenseList = 0xFFFFFFFFu;

// Rounds of pass 2, each with θ recomputed from every candidate so far (or_tiles.cu plans them).
constexpr uint32_t kRounds = 8;

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

// 1a. One thread block per block of every sparse list: its postings' BM25 scores, kept in
// SparsePostings with where each tile starts, and their maxima per slice (float bits: positive
// floats order as integers).
// Thread blocks loop over the sparse lists' blocks (any grid covers them).
template <int BS>
__global__ void __launch_bounds__(BS)
    sparse_maxima_kernel(const SparseList* sparse, const RunSizes* sizes, const float* norms, uint32_t doc_begin,
                         uint32_t slices, uint32_t* sparse_maxima, SparsePostings out, QueryScratch* scratch) {
  __shared__ uint32_t index;
  __shared__ uint32_t tile_of[BS];
  __shared__ BlockDecodeStorage<BS> storage;
  const uint32_t count = sizes->sparse, blocks = sizes->sparse_blocks;
  for (uint32_t task_block = blockIdx.x; task_block < blocks; task_block += gridDim.x) {
    if (threadIdx.x == 0) index = task_of_block(sparse, count, task_block);
    __syncthreads();
    const SparseList& task = sparse[index];
    const uint32_t block = task_block - task.block_begin;
    const uint32_t n = min(static_cast<uint32_t>(BS), task.list.count - block * BS);
    uint32_t doc, freq;
    decode_postings<BS>(task.list, block, n, storage, doc, freq);
    const bool live = threadIdx.x < n;
    const uint32_t local = live ? doc - doc_begin : 0;
    const float score = live ? bm25_units_dev(task.weight, freq, norms[local]) : 0;
    atomic_max_runs(sparse_maxima + size_t{task.slot} * slices, local / kSliceDocs, __float_as_uint(score), live);
    const uint32_t position = block * BS + threadIdx.x, tile = local / kTile;
    tile_of[threadIdx.x] = tile;
    __syncthreads();
    if (live) {
      out.docs[size_t{task.slot} * out.capacity + position] = doc;
      out.scores[size_t{task.slot} * out.capacity + position] = score;
      // Tiles after the previous posting's, up to this one's, start here; after the last, at the end.
      const uint32_t after_previous = threadIdx.x > 0 ? tile_of[threadIdx.x - 1] + 1
                                      : block == 0    ? 0
                                                      : (task.list.block_last_docid[block - 1] - doc_begin) / kTile + 1;
      uint32_t* starts = out.tile_start + size_t{task.slot} * out.tiles;
      for (uint32_t t = after_previous; t <= tile; ++t) starts[t] = position;
      if (position + 1 == task.list.count) {
        for (uint32_t t = tile + 1; t < out.tiles; ++t) starts[t] = task.list.count;
      }
    }
    if (threadIdx.x == 0) {
      atomicAdd(&scratch[task.query].counters.blocks_decoded, 1ull);
      atomicAdd(&scratch[task.query].counters.postings_decoded, static_cast<unsigned long long>(n));
    }
    __syncthreads();  // the shared index and tiles are the next block's
  }
}

// A bound of one list's scores in slice `slice` of the partition, in the query's units: its slice
// maxima, the exact maxima of a sparse list, or else the largest block-max among the blocks
// overlapping the slice (stored bounds scaled by `bound_scale`).
__device__ float list_slice_bound(const DeviceList& list, float bound_scale, uint32_t sparse_slot,
                                  const uint32_t* sparse_maxima, uint32_t slices, uint32_t slice, uint32_t doc_begin,
                                  uint32_t doc_count) {
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
__device__ float slice_bound(const EngineQuery& q, const BoundInputs& in, uint32_t tile, uint32_t lane) {
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

// 1b. One warp per (tile, query), a lane per slice: the tile's bound is its best slice's.
__global__ void tile_bound_kernel(const EngineQuery* queries, const RunSizes* sizes, BoundInputs in, uint32_t tiles,
                                  float* bounds, QueryScratch* scratch) {
  if (blockIdx.y >= sizes->queries) return;  // uniform
  const uint32_t tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;  // whole warps
  const uint32_t lane = threadIdx.x & 31u;
  float bound = slice_bound(queries[blockIdx.y], in, tile, lane);
  in.slice_bounds[(size_t{blockIdx.y} * tiles + tile) * kSlicesPerTile + lane] = bound;
  for (int offset = 16; offset > 0; offset /= 2) bound = fmaxf(bound, __shfl_xor_sync(0xFFFFFFFFu, bound, offset));
  if (lane == 0) {
    bounds[size_t{blockIdx.y} * tiles + tile] = bound;
    if (bound > 0) atomicAdd(&scratch[blockIdx.y].bound_buckets[float_bucket(bound)], 1u);
  }
}

// 2. One block per query: the first pass takes the `capacity` tiles of highest bound (those in
// buckets above the capacity-th, then from its bucket while room is left); their bounds are
// negated so the second pass skips them.
__global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const RunSizes* sizes, float* bounds, uint32_t tiles, uint32_t capacity, uint32_t* first_tiles,
                QueryScratch* scratch) {
  if (blockIdx.x >= sizes->queries) return;  // uniform
  QueryScratch& s = scratch[blockIdx.x];
  float* row = bounds + size_t{blockIdx.x} * tiles;
  uint32_t* first = first_tiles + size_t{blockIdx.x} * capacity;
  __shared__ uint32_t taken;
  if (threadIdx.x == 0) taken = 0;
  uint32_t cut, above;
  if (!find_rank<kPlanThreads>(s.bound_buckets, capacity, cut, above)) cut = 0;  // fewer tiles: all of them
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) {
    const float b = row[t];
    if (b > 0 && float_bucket(b) > cut) {
      first[atomicAdd(&taken, 1u)] = t;
      row[t] = -b;
    }
  }
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) {
    const float b = row[t];
    if (b > 0 && float_bucket(b) == cut) {
      const uint32_t at = atomicAdd(&taken, 1u);
      if (at < capacity) first[at] = t, row[t] = -b;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) s.first_count = min(taken, capacity);
}

// 4. One block per query: θ from the candidates so far (the bucket of the k-th best key, then a
// histogram of that bucket's keys by their next 12 bits), and the tiles not yet scored whose
// bound reaches θ and, with rank > 0, lies in the bucket of the rank-th best tile bound or above,
// appended to the batch's work list and marked scored (negated); the round's figures go to the
// query's scratch.
__global__ void __launch_bounds__(kPlanThreads)
    theta_kernel(const EngineQuery* queries, const RunSizes* sizes, float* bounds, uint32_t round, uint32_t rank,
                 uint32_t tiles, const uint64_t* keys, size_t key_stride, uint32_t* second_tiles,
                 uint32_t* second_total, QueryScratch* scratch) {
  const uint32_t qi = blockIdx.x;
  if (qi >= sizes->queries) return;  // uniform
  QueryScratch& s = scratch[qi];
  const uint32_t k = queries[qi].k;
  __shared__ uint32_t sub[kBuckets];
  __shared__ uint32_t count, base, cursor;
  for (uint32_t b = threadIdx.x; b < kBuckets; b += kPlanThreads) sub[b] = 0;
  if (threadIdx.x == 0) count = 0, cursor = 0;
  uint32_t bucket, above, theta_bits = 0;
  if (find_rank<kPlanThreads>(s.key_buckets, k, bucket, above)) {  // synchronises: sub is zeroed
    theta_bits = bucket << (31 - kBucketBits);                     // the bucket's lower edge
    const uint32_t key_count = s.key_count;
    if (key_count <= key_stride) {  // uniform; else the row lost keys, and the run is repeated alone
      const uint64_t* row = keys + qi * key_stride;
      // kKeysInFlight loads a thread before any is used (one key at a time waited for each load
      // before the next, the atomic between them): H100, GOV2-like OR top-1000 one query at a
      // time 3,416 / 3,356 -> 3,534 / 3,586 q/s, p99 0.62 -> 0.56 ms; batches unchanged.
      constexpr uint32_t kKeysInFlight = 8;
      for (uint32_t first = threadIdx.x; first < key_count; first += kKeysInFlight * kPlanThreads) {
        uint64_t batch[kKeysInFlight];
#pragma unroll
        for (uint32_t j = 0; j < kKeysInFlight; ++j) {
          const uint32_t i = first + j * kPlanThreads;
          batch[j] = i < key_count ? row[i] : 0;
        }
#pragma unroll
        for (uint32_t j = 0; j < kKeysInFlight; ++j) {
          if (first + j * kPlanThreads < key_count && key_bucket(batch[j]) == bucket) {
            atomicAdd(&sub[static_cast<uint32_t>(batch[j] >> (63 - 2 * kBucketBits)) & (kBuckets - 1)], 1u);
          }
        }
      }
      __syncthreads();
      uint32_t sub_bucket, sub_above;
      find_rank<kPlanThreads>(sub, k - above, sub_bucket, sub_above);
      theta_bits |= sub_bucket << (31 - 2 * kBucketBits);
    }
  }
  // The query's floor (positive floats order as their bits): a lower bound on the k-th best as
  // much as the candidates' bucket is, often far higher in the first rounds at large k.
  theta_bits = max(theta_bits, queries[qi].floor_bits);
  const float cut = __uint_as_float(theta_bits);
  uint32_t rank_bucket = 0, rank_above;
  if (rank > 0 && !find_rank<kPlanThreads>(s.bound_buckets, rank, rank_bucket, rank_above)) rank_bucket = 0;
  float* row = bounds + size_t{qi} * tiles;
  const auto take = [&](float bound) {
    return bound > 0 && bound * kBoundSlack >= cut && float_bucket(bound) >= rank_bucket;
  };
  uint32_t mine = 0;
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) mine += take(row[t]);
  if (mine != 0) atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) {
    base = count == 0 ? 0 : atomicAdd(second_total, count);
    s.theta_bits = theta_bits;
    s.round_theta_bits[round] = theta_bits, s.round_tiles[round] = count;
    s.blocks_before_round[round] = s.counters.blocks_decoded;
  }
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) {
    if (take(row[t])) {
      second_tiles[base + atomicAdd(&cursor, 1u)] = qi << (32 - kQueryBits) | t;
      row[t] = -row[t];
    }
  }
}

}  // namespace
}  // namespace warp::gpu
