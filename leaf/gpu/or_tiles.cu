#include "leaf/gpu/or_tiles.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cub/block/block_scan.cuh>
#include <string>

#include "common/util/status.hpp"
#include "leaf/gpu/block_select.cuh"
#include "leaf/gpu/cuda_check.cuh"
#include "leaf/gpu/list_decode.cuh"

namespace warp::gpu {
namespace {

constexpr uint32_t kTile = OrTiles::kTileDocs;
// Block maxima are the CPU's float arithmetic and a GPU score sums in another order: a tile is
// skipped only when its bound is below θ by more than rounding can explain.
constexpr float kBoundSlack = 1.0f + 1e-4f;
constexpr uint32_t kPlanThreads = 1024;
constexpr uint32_t kSortThreads = kBlockSelectThreads, kSortCapacity = kBlockSelectCapacity;
constexpr uint32_t kHeader = 6;  // a result row: selected, overflow, blocks, postings, tiles scored, θ bits; then keys
constexpr uint32_t kQueryBits = 8;   // a second-pass work item: query << 24 | tile
constexpr uint32_t kTileMask = (1u << (32 - kQueryBits)) - 1;

struct EngineQuery {
  uint32_t list_begin, list_count, k, pad;
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

struct QueryScratch {  // per query, zeroed before each run
  Counters counters;
  uint32_t bound_buckets[kBuckets];  // tiles by upper bound
  uint32_t key_buckets[kBuckets];    // candidates by key
  uint32_t key_count;
  uint32_t first_count;
  uint32_t theta_bits;  // θ as float bits: every candidate kept by pass 2 scores at least θ
  uint32_t tiles_scored;
};

__device__ __forceinline__ uint32_t float_bucket(float score) { return key_bucket(topk_key(score, 0)); }

// The sparse lists' postings, decoded and scored once per run: a tile reads its few postings of
// such a list from here (from tile_start[tile] to tile_start[tile + 1]) instead of decoding the
// block that holds them, which spans many tiles.
struct SparsePostings {
  uint32_t* docs;        // per slot, `capacity` postings in list order
  float* scores;
  uint32_t* tile_start;  // per slot, `tiles`: the first posting at or after each tile's first document
  uint32_t capacity, tiles;
};

// 1a. One thread block per block of every sparse list: its postings' BM25 scores, kept in
// SparsePostings with where each tile starts, and their maxima per slice (float bits: positive
// floats order as integers).
template <int BS>
__global__ void __launch_bounds__(BS) sparse_maxima_kernel(const SparseList* sparse, uint32_t count, const float* norms,
                                                           uint32_t doc_begin, uint32_t slices, uint32_t* sparse_maxima,
                                                           SparsePostings out, QueryScratch* scratch) {
  __shared__ uint32_t index;
  __shared__ uint32_t tile_of[BS];
  __shared__ BlockDecodeStorage<BS> storage;
  if (threadIdx.x == 0) index = task_of_block(sparse, count, blockIdx.x);
  __syncthreads();
  const SparseList& task = sparse[index];
  const uint32_t block = blockIdx.x - task.block_begin;
  const uint32_t n = min(static_cast<uint32_t>(BS), task.list.count - block * BS);
  uint32_t doc, freq;
  decode_postings<BS>(task.list, block, n, storage, doc, freq);
  const bool live = threadIdx.x < n;
  const uint32_t local = live ? doc - doc_begin : 0;
  const float score = live ? bm25_dev(task.weight, freq, norms[local]) : 0;
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
}

// A bound of one list's scores in slice `slice` of the partition: its slice maxima, the exact
// maxima of a sparse list, or else the largest block-max among the blocks overlapping the slice.
__device__ float list_slice_bound(const DeviceList& list, uint32_t sparse_slot, const uint32_t* sparse_maxima,
                                  uint32_t slices, uint32_t slice, uint32_t doc_begin, uint32_t doc_count) {
  if (list.slice_max != nullptr) return list.slice_max[slice] * list.slice_scale;
  if (sparse_slot != kDenseList) return __uint_as_float(sparse_maxima[size_t{sparse_slot} * slices + slice]);
  const uint32_t first = doc_begin + slice * kSliceDocs;
  const uint32_t last = doc_begin + min((slice + 1) * kSliceDocs, doc_count) - 1;
  float best = 0;
  for (uint32_t b = block_for_doc(list.block_last_docid, list.block_count, first); b < list.block_count; ++b) {
    if (b > 0 && list.block_last_docid[b - 1] >= last) break;  // block b starts after the slice
    best = fmaxf(best, list.block_max_score[b]);
    if (list.block_last_docid[b] >= last) break;
  }
  return best;
}

struct BoundInputs {
  const DeviceList* lists;
  const uint32_t* sparse_slots;   // per list: its row of sparse maxima, or kDenseList
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
    bound += list_slice_bound(in.lists[q.list_begin + l], in.sparse_slots[q.list_begin + l], in.sparse_maxima, in.slices,
                              slice, in.doc_begin, in.doc_count);
  }
  return bound;
}

// 1b. One warp per (tile, query), a lane per slice: the tile's bound is its best slice's.
__global__ void tile_bound_kernel(const EngineQuery* queries, BoundInputs in, uint32_t tiles, float* bounds,
                                  QueryScratch* scratch) {
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
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(float* bounds, uint32_t tiles, uint32_t capacity,
                                                            uint32_t* first_tiles, QueryScratch* scratch) {
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

// The slices of the tile worth scoring (bit i: slice i), from the slice bounds stored by the
// bound kernel; one warp calls it: bound > 0 (pass 1) or bound reaching θ (pass 2).
__device__ uint32_t live_slices(const BoundInputs& in, uint32_t query, uint32_t tile, float theta, bool first_pass) {
  const float bound = in.slice_bounds[(size_t{query} * in.sparse.tiles + tile) * kSlicesPerTile + (threadIdx.x & 31u)];
  return __ballot_sync(0xFFFFFFFFu, first_pass ? bound > 0 : bound * kBoundSlack >= theta);
}

// The live slices of the tile that a block's docID range (previous block's last, this block's
// last] covers, as a mask; zero when the block holds nothing worth scoring.
__device__ __forceinline__ uint32_t block_live_slices(const DeviceList& list, uint32_t block, uint32_t first_doc,
                                                      uint32_t last_doc, uint32_t live) {
  const uint32_t block_first = block == 0 ? 0 : list.block_last_docid[block - 1] + 1;
  const uint32_t s0 = (max(block_first, first_doc) - first_doc) / kSliceDocs;
  const uint32_t s1 = (min(list.block_last_docid[block], last_doc) - first_doc) / kSliceDocs;
  return live & (s1 == 31 ? 0xFFFFFFFFu : (1u << (s1 + 1)) - 1) & ~((1u << s0) - 1);
}

// f(i) for every score index i of the live slices of a tile that this thread owns (thread t: the
// slice's t-th document, and t + BS...): the loops over a tile touch only its live slices.
template <int BS, class F>
__device__ __forceinline__ void for_live(uint32_t live, F&& f) {
  for (uint32_t bits = live; bits != 0; bits &= bits - 1) {
    const uint32_t first = (__ffs(bits) - 1) * kSliceDocs;
    for (uint32_t i = first + threadIdx.x; i < first + kSliceDocs; i += BS) f(i);
  }
}

__device__ __forceinline__ bool in_live_slice(uint32_t live, uint32_t local) { return live >> (local / kSliceDocs) & 1u; }

// One warp decodes a BP block (warp_decode_bp) and adds the BM25 of its postings in live slices.
template <int BS>
__device__ void warp_score_bp_block(const DeviceList& list, uint32_t block, float weight, const float* norms,
                                    uint32_t doc_begin, uint32_t tile_first, uint32_t tile_end, uint32_t live,
                                    float* scores) {
  constexpr uint32_t kPerLane = BS / 32;
  uint32_t docs[kPerLane], freqs[kPerLane];
  const uint32_t n = warp_decode_bp<BS>(list, block, docs, freqs);
  const uint32_t first = (threadIdx.x & 31u) * kPerLane;
  for (uint32_t j = 0; j < kPerLane; ++j) {
    const uint32_t local = docs[j] - doc_begin;
    if (first + j < n && local >= tile_first && local < tile_end && in_live_slice(live, local - tile_first)) {
      atomicAdd(&scores[local - tile_first], bm25_dev(weight, freqs[j], norms[local]));
    }
  }
}

// The blocks of up to 32 BP lists that overlap a tile, numbered across the lists so that the warps
// of a thread block share them out whatever the lists' lengths (shared memory).
struct TilePlan {
  uint32_t start[32];       // first block of each list overlapping the tile
  uint32_t prefix[32 + 1];  // items before each list
};

// Scores one tile: decodes every block of the query's lists that overlaps a live slice of it and
// adds BM25 into scores[0..kTile) (shared). A document of a dead slice may get part of its score
// only: it scores below θ, and pass 2 keeps nothing below θ. Blocks of BP lists go a block per
// warp, those of other codecs a block per thread block. `counts` (shared): blocks and postings
// decoded, added to. Every thread of the block calls it.
// Warp 1 (one lane per list of the chunk of up to 32 from `chunk`): the chunk's BP lists' blocks
// overlapping the tile, numbered across the lists.
__device__ void plan_tile(const EngineQuery& q, const BoundInputs& in, uint32_t chunk, uint32_t tile, uint32_t first_doc,
                          uint32_t last_doc, bool last_tile, TilePlan& plan) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t in_chunk = min(32u, q.list_count - chunk);
  uint32_t start = 0, count = 0;
  if (lane < in_chunk) {
    const DeviceList& list = in.lists[q.list_begin + chunk + lane];
    const bool sparse = in.sparse_slots[q.list_begin + chunk + lane] != kDenseList;
    if (!sparse && is_bp(list.codec) && is_bp(list.freq_codec) && list.block_count > 0) {
      const bool directory = list.tile_first_block != nullptr;
      start = directory ? list.tile_first_block[tile] : block_for_doc(list.block_last_docid, list.block_count, first_doc);
      const uint32_t end = directory && !last_tile ? list.tile_first_block[tile + 1]
                                                   : block_for_doc(list.block_last_docid, list.block_count, last_doc);
      if (start < list.block_count) count = min(end, list.block_count - 1) - start + 1;
    }
  }
  uint32_t inclusive = count;
  for (uint32_t offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  plan.start[lane] = start;
  plan.prefix[lane + 1] = inclusive;
  if (lane == 0) plan.prefix[0] = 0;
}

// Scores one tile of query `query`: decodes every block of its lists that overlaps a live slice
// of the tile and adds the BM25 of the postings in live slices into scores[0..kTile) (shared,
// zero on entry; dead slices stay zero; a dead slice scores below θ and pass 2 keeps nothing below
// θ). Blocks of BP lists go a block per warp, those of other codecs a block per thread block,
// sparse lists' postings a thread each. Sets `live` (shared); adds blocks and postings decoded to
// `counts` (shared). Every thread of the block calls it.
template <int BS>
__device__ void score_tile(const EngineQuery& q, uint32_t query, const BoundInputs& in, const float* weights,
                           const float* norms, uint32_t tile, float theta, bool first_pass, uint32_t& live,
                           float* scores, BlockDecodeStorage<BS>& storage, TilePlan& plan, uint32_t* counts) {
  const DeviceList* lists = in.lists;
  const uint32_t doc_begin = in.doc_begin;
  const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, in.doc_count);
  const uint32_t first_doc = doc_begin + tile_first, last_doc = doc_begin + tile_end - 1;
  const bool last_tile = tile_end == in.doc_count;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  // At once: the live slices (warp 0), the first chunk's plan (warp 1).
  if (warp == 0) {
    const uint32_t mask = live_slices(in, query, tile, theta, first_pass);
    if (lane == 0) live = mask;
  } else if (warp == 1 && q.list_count > 0) {
    plan_tile(q, in, 0, tile, first_doc, last_doc, last_tile, plan);
  }
  __syncthreads();
  uint32_t blocks = 0, postings = 0;
  for (uint32_t chunk = 0; chunk < q.list_count; chunk += 32) {
    const uint32_t in_chunk = min(32u, q.list_count - chunk);
    if (chunk > 0) {
      if (warp == 1) plan_tile(q, in, chunk, tile, first_doc, last_doc, last_tile, plan);
      __syncthreads();
    }
    const uint32_t items = plan.prefix[in_chunk];
    for (uint32_t item = warp; item < items; item += BS / 32) {  // uniform per warp
      uint32_t j = 0;
      while (plan.prefix[j + 1] <= item) ++j;
      const DeviceList& list = lists[q.list_begin + chunk + j];
      const uint32_t block = plan.start[j] + (item - plan.prefix[j]);
      if (block > 0 && list.block_last_docid[block - 1] >= last_doc) continue;  // starts after the tile
      if (block_live_slices(list, block, first_doc, last_doc, live) == 0) continue;
      warp_score_bp_block<BS>(list, block, weights[q.list_begin + chunk + j], norms, doc_begin, tile_first, tile_end, live,
                              scores);
      ++blocks, postings += min(static_cast<uint32_t>(BS), list.count - block * BS);
    }
    for (uint32_t j = 0; j < in_chunk; ++j) {
      const DeviceList& list = lists[q.list_begin + chunk + j];
      const float weight = weights[q.list_begin + chunk + j];
      const uint32_t slot = in.sparse_slots[q.list_begin + chunk + j];
      if (slot != kDenseList) {  // scored postings of a sparse list, a thread each
        const uint32_t* starts = in.sparse.tile_start + size_t{slot} * in.sparse.tiles;
        const uint32_t end = last_tile ? list.count : starts[tile + 1];
        for (uint32_t i = starts[tile] + threadIdx.x; i < end; i += BS) {
          const uint32_t local = in.sparse.docs[size_t{slot} * in.sparse.capacity + i] - first_doc;
          if (in_live_slice(live, local)) atomicAdd(&scores[local], in.sparse.scores[size_t{slot} * in.sparse.capacity + i]);
        }
        continue;
      }
      if (is_bp(list.codec) && is_bp(list.freq_codec)) continue;
      // The other codecs: a block per thread block.
      const uint32_t start = list.tile_first_block != nullptr ? list.tile_first_block[tile]
                                                              : block_for_doc(list.block_last_docid, list.block_count, first_doc);
      for (uint32_t block = start; block < list.block_count; ++block) {  // uniform over the thread block
        if (block > 0 && list.block_last_docid[block - 1] >= last_doc) break;
        if (block_live_slices(list, block, first_doc, last_doc, live) == 0) continue;
        const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
        uint32_t doc, freq;
        decode_postings<BS>(list, block, n, storage, doc, freq);
        const uint32_t local = doc - doc_begin;
        if (threadIdx.x < n && local >= tile_first && local < tile_end && in_live_slice(live, local - tile_first)) {
          atomicAdd(&scores[local - tile_first], bm25_dev(weight, freq, norms[local]));
        }
        __syncthreads();  // decode_postings reuses its storage
        if (threadIdx.x == 0) ++blocks, postings += n;
      }
    }
    __syncthreads();  // the plan is rewritten by the next chunk; the scores are complete
  }
  if (lane == 0 && blocks != 0) {  // each warp's count
    atomicAdd(&counts[0], blocks);
    atomicAdd(&counts[1], postings);
  }
  __syncthreads();
}

// 3. Pass 1, one block per (first-pass tile, query): the tile's own top-k become candidates (a
// shared histogram of its scores, the bucket of its k-th best, a compaction of the keys at or
// above it); the kept buckets are added to the query's key histogram.
template <int BS>
__global__ void __launch_bounds__(BS) first_pass_kernel(const EngineQuery* queries, BoundInputs in, const float* weights,
                                                        const float* norms, const uint32_t* first_tiles,
                                                        uint32_t capacity, uint64_t* keys, size_t key_stride,
                                                        QueryScratch* scratch) {
  constexpr uint32_t kPerThread = kBuckets / BS;
  using Scan = cub::BlockScan<uint32_t, BS>;
  __shared__ float scores[kTile];
  __shared__ uint32_t histogram[kBuckets];
  __shared__ BlockDecodeStorage<BS> storage;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint64_t threshold;
  __shared__ uint32_t base, live, counts[2];
  __shared__ TilePlan plan;
  const uint32_t doc_begin = in.doc_begin, doc_count = in.doc_count;
  const uint32_t qi = blockIdx.y;
  QueryScratch& s = scratch[qi];
  if (blockIdx.x >= s.first_count) return;  // uniform
  const EngineQuery q = queries[qi];
  const uint32_t tid = threadIdx.x;
  const uint32_t tile = first_tiles[size_t{qi} * capacity + blockIdx.x];
  const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, doc_count);
  for (uint32_t b = tid; b < kBuckets; b += BS) histogram[b] = 0;
  for (uint32_t i = tid; i < kTile; i += BS) scores[i] = 0;
  if (tid == 0) counts[0] = counts[1] = 0;
  score_tile<BS>(q, qi, in, weights, norms, tile, 0, true, live, scores, storage, plan, counts);
  for_live<BS>(live, [&](uint32_t i) {
    if (scores[i] > 0) atomicAdd(&histogram[float_bucket(scores[i])], 1u);
  });
  __syncthreads();
  // The bucket of the tile's k-th best: thread t owns kPerThread buckets from the top.
  uint32_t mine = 0;
  for (uint32_t j = 0; j < kPerThread; ++j) mine += histogram[kBuckets - 1 - (tid * kPerThread + j)];
  uint32_t above, total;
  Scan(scan_storage).ExclusiveSum(mine, above, total);
  if (tid == 0) threshold = 1;  // fewer than k scores: keep them all
  __syncthreads();
  if (total >= q.k && above < q.k && above + mine >= q.k) {
    uint32_t running = above;
    for (uint32_t j = 0; j < kPerThread; ++j) {
      const uint32_t bucket = kBuckets - 1 - (tid * kPerThread + j);
      running += histogram[bucket];
      if (running >= q.k) {
        threshold = bucket == 0 ? 1 : static_cast<uint64_t>(bucket) << (63 - kBucketBits);
        break;
      }
    }
  }
  __syncthreads();
  uint32_t keep = 0;
  for_live<BS>(live, [&](uint32_t i) { keep += scores[i] > 0 && topk_key(scores[i], doc_begin + tile_first + i) >= threshold; });
  uint32_t offset, kept;
  Scan(scan_storage).ExclusiveSum(keep, offset, kept);
  if (tid == 0) base = kept == 0 ? 0 : atomicAdd(&s.key_count, kept);
  __syncthreads();
  uint64_t* row = keys + qi * key_stride;
  for_live<BS>(live, [&](uint32_t i) {
    if (scores[i] > 0) {
      const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
      if (key >= threshold) row[base + offset++] = key;
    }
  });
  for (uint32_t b = key_bucket(threshold) + tid; b < kBuckets; b += BS) {
    if (histogram[b] != 0) atomicAdd(&s.key_buckets[b], histogram[b]);
  }
  if (tid == 0) {
    atomicAdd(&s.counters.blocks_decoded, static_cast<unsigned long long>(counts[0]));
    atomicAdd(&s.counters.postings_decoded, static_cast<unsigned long long>(counts[1]));
    atomicAdd(&s.tiles_scored, 1u);
  }
}

// 4. One block per query: θ from the candidates so far (the bucket of the k-th best key, then a
// histogram of that bucket's keys by their next 12 bits), and the tiles not yet scored whose
// bound reaches θ × factor, appended to the batch's work list and marked scored (negated).
__global__ void __launch_bounds__(kPlanThreads) theta_kernel(const EngineQuery* queries, float* bounds, float factor,
                                                             uint32_t tiles, const uint64_t* keys, size_t key_stride,
                                                             uint32_t* second_tiles, uint32_t* second_total,
                                                             QueryScratch* scratch) {
  const uint32_t qi = blockIdx.x;
  QueryScratch& s = scratch[qi];
  const uint32_t k = queries[qi].k;
  __shared__ uint32_t sub[kBuckets];
  __shared__ uint32_t count, base, cursor;
  for (uint32_t b = threadIdx.x; b < kBuckets; b += kPlanThreads) sub[b] = 0;
  if (threadIdx.x == 0) count = 0, cursor = 0;
  uint32_t bucket, above, theta_bits = 0;
  if (find_rank<kPlanThreads>(s.key_buckets, k, bucket, above)) {  // synchronises: sub is zeroed
    const uint64_t* row = keys + qi * key_stride;
    for (uint32_t i = threadIdx.x; i < s.key_count; i += kPlanThreads) {
      const uint64_t key = row[i];
      if (key_bucket(key) == bucket) atomicAdd(&sub[static_cast<uint32_t>(key >> (63 - 2 * kBucketBits)) & (kBuckets - 1)], 1u);
    }
    __syncthreads();
    uint32_t sub_bucket, sub_above;
    find_rank<kPlanThreads>(sub, k - above, sub_bucket, sub_above);
    theta_bits = bucket << (31 - kBucketBits) | sub_bucket << (31 - 2 * kBucketBits);
  }
  const float cut = __uint_as_float(theta_bits) * factor;
  float* row = bounds + size_t{qi} * tiles;
  uint32_t mine = 0;
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) mine += row[t] > 0 && row[t] * kBoundSlack >= cut;
  if (mine != 0) atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) {
    base = count == 0 ? 0 : atomicAdd(second_total, count);
    s.theta_bits = theta_bits;
  }
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) {
    if (row[t] > 0 && row[t] * kBoundSlack >= cut) {
      second_tiles[base + atomicAdd(&cursor, 1u)] = qi << (32 - kQueryBits) | t;
      row[t] = -row[t];
    }
  }
}

// 5. Pass 2: persistent blocks over the batch's work list; a tile keeps its documents scoring at
// least θ (few: θ is near the k-th best).
template <int BS>
__global__ void __launch_bounds__(BS) second_pass_kernel(const EngineQuery* queries, BoundInputs in, const float* weights,
                                                         const float* norms, const uint32_t* second_tiles,
                                                         const uint32_t* second_total, uint64_t* keys,
                                                         size_t key_stride, QueryScratch* scratch) {
  using Scan = cub::BlockScan<uint32_t, BS>;
  __shared__ float scores[kTile];
  __shared__ BlockDecodeStorage<BS> storage;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t base, live, counts[2];
  __shared__ TilePlan plan;
  const uint32_t doc_begin = in.doc_begin, doc_count = in.doc_count;
  const uint32_t total = *second_total;
  for (uint32_t i = threadIdx.x; i < kTile; i += BS) scores[i] = 0;  // each tile leaves its live slices zeroed
  for (uint32_t item = blockIdx.x; item < total; item += gridDim.x) {
    const uint32_t work = second_tiles[item];
    const uint32_t qi = work >> (32 - kQueryBits), tile = work & kTileMask;
    QueryScratch& s = scratch[qi];
    const EngineQuery q = queries[qi];
    const uint32_t theta_bits = s.theta_bits;
    const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, doc_count);
    if (threadIdx.x == 0) counts[0] = counts[1] = 0;
    score_tile<BS>(q, qi, in, weights, norms, tile, __uint_as_float(theta_bits), false, live, scores, storage, plan, counts);
    uint32_t keep = 0;
    for_live<BS>(live, [&](uint32_t i) { keep += scores[i] > 0 && __float_as_uint(scores[i]) >= theta_bits; });
    uint32_t offset, kept;
    Scan(scan_storage).ExclusiveSum(keep, offset, kept);
    if (threadIdx.x == 0) {
      base = kept == 0 ? 0 : atomicAdd(&s.key_count, kept);
      atomicAdd(&s.counters.blocks_decoded, static_cast<unsigned long long>(counts[0]));
      atomicAdd(&s.counters.postings_decoded, static_cast<unsigned long long>(counts[1]));
      atomicAdd(&s.tiles_scored, 1u);
    }
    __syncthreads();
    uint64_t* row = keys + qi * key_stride;
    for_live<BS>(live, [&](uint32_t i) {
      if (scores[i] > 0 && __float_as_uint(scores[i]) >= theta_bits) {
        const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
        row[base + offset++] = key;
        atomicAdd(&s.key_buckets[key_bucket(key)], 1u);
      }
      scores[i] = 0;  // the thread that read it: no barrier needed
    });
    __syncthreads();  // scores, live and base are reused by the next tile
  }
}

// 6. One block per query: the bucket of the k-th best candidate, the keys at or above it gathered
// and sorted in the block; the row gets [selected, overflow, blocks, postings, tiles, θ, k best keys].
__global__ void __launch_bounds__(kSortThreads) select_kernel(const EngineQuery* queries, const uint64_t* keys,
                                                              size_t key_stride, uint64_t* staging,
                                                              const QueryScratch* scratch, uint64_t* results,
                                                              uint32_t result_stride) {
  const uint32_t qi = blockIdx.x;
  const QueryScratch& s = scratch[qi];
  const uint32_t k = queries[qi].k;
  uint64_t* out = results + size_t{qi} * result_stride;
  uint32_t selected;
  const bool fits = block_select(keys + qi * key_stride, s.key_count, s.key_buckets, k, staging + size_t{qi} * kSortCapacity,
                                 out + kHeader, selected);
  if (threadIdx.x == 0) {
    out[0] = selected, out[1] = !fits;
    out[2] = s.counters.blocks_decoded, out[3] = s.counters.postings_decoded, out[4] = s.tiles_scored;
    out[5] = s.theta_bits;
  }
}


template <class T>
void device_alloc(T*& p, size_t count) {
  WARP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
}

}  // namespace

// The per-run inputs (queries, lists, their weights and sparse rows, the sparse lists) are packed
// into one pinned staging area and go over in one copy; `Staged` points into either copy.
struct Staged {
  EngineQuery* queries;
  DeviceList* lists;
  uint32_t* sparse_slots;  // per list: its row of sparse maxima, or kDenseList
  float* weights;
  SparseList* sparse;
  size_t bytes;
};

Staged carve_staging(char* base, size_t queries, size_t lists) {
  size_t offset = 0;
  auto take = [&](size_t bytes) {  // base null: only the size is wanted
    char* p = base == nullptr ? nullptr : base + offset;
    offset = (offset + bytes + 15) / 16 * 16;
    return p;
  };
  Staged s{};
  s.queries = reinterpret_cast<EngineQuery*>(take(queries * sizeof(EngineQuery)));
  s.lists = reinterpret_cast<DeviceList*>(take(lists * sizeof(DeviceList)));
  s.sparse_slots = reinterpret_cast<uint32_t*>(take(lists * sizeof(uint32_t)));
  s.weights = reinterpret_cast<float*>(take(lists * sizeof(float)));
  s.sparse = reinterpret_cast<SparseList*>(take(lists * sizeof(SparseList)));
  s.bytes = offset;
  return s;
}

struct OrTiles::Buffers {
  uint32_t tiles = 0, slices = 0, sparse_capacity = 0, first_capacity = 0, persistent_128 = 0, persistent_256 = 0;
  char* inputs = nullptr;       // device copy of the staging area
  char* host_inputs = nullptr;  // pinned staging area
  uint32_t* sparse_maxima = nullptr;  // sparse_capacity × slices
  SparsePostings sparse{};
  float* slice_bounds = nullptr;  // max_queries × tiles × 32
  QueryScratch* scratch = nullptr;
  float* bounds = nullptr;
  uint32_t* first_tiles = nullptr;
  uint32_t* second_tiles = nullptr;
  uint32_t* second_total = nullptr;
  uint64_t* staging = nullptr;
  uint64_t* results = nullptr;
  uint64_t* host_results = nullptr;
  ~Buffers() {
    for (void* p : {(void*)inputs, (void*)sparse_maxima, (void*)sparse.docs, (void*)sparse.scores, (void*)sparse.tile_start, (void*)slice_bounds, (void*)scratch, (void*)bounds, (void*)first_tiles,
                    (void*)second_tiles, (void*)second_total, (void*)staging, (void*)results}) {
      cudaFree(p);
    }
    cudaFreeHost(host_inputs);
    cudaFreeHost(host_results);
  }
};

// With WARP_GPU_STAGE_TIMES set, CUDA events around the stages; the mean per query and the tiles
// scored go to stderr when the object is destroyed.
struct OrTiles::StageTimes {
  static constexpr int kMarks = 6;
  bool on = std::getenv("WARP_GPU_STAGE_TIMES") != nullptr;
  cudaEvent_t events[kMarks] = {};
  double total_ms[kMarks - 1] = {};
  uint64_t queries = 0, tiles_scored = 0, tiles_total = 0, theta_count = 0;
  double theta_ratio = 0;  // θ over the k-th best score, for queries with k answers
  void mark(int i, cudaStream_t stream) {
    if (!on) return;
    if (events[i] == nullptr) WARP_CUDA_CHECK(cudaEventCreate(&events[i]));
    WARP_CUDA_CHECK(cudaEventRecord(events[i], stream));
  }
  void add(size_t n) {  // after the stream synchronised
    if (!on) return;
    for (int i = 0; i + 1 < kMarks; ++i) {
      float ms = 0;
      WARP_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
      total_ms[i] += ms;
    }
    queries += n;
  }
  ~StageTimes() {
    if (on && queries > 0) {
      const double q = static_cast<double>(queries);
      std::fprintf(stderr,
                   "gpu OR tiles over %llu queries, us per query: bounds+plan %.1f, pass 1 %.1f, theta %.1f, pass 2 %.1f, "
                   "select %.1f; tiles scored %.1f%% (%.0f of %.0f per query); theta / k-th best %.3f\n",
                   static_cast<unsigned long long>(queries), total_ms[0] * 1e3 / q, total_ms[1] * 1e3 / q,
                   total_ms[2] * 1e3 / q, total_ms[3] * 1e3 / q, total_ms[4] * 1e3 / q,
                   tiles_total == 0 ? 0.0 : 100.0 * tiles_scored / tiles_total, tiles_scored / q, tiles_total / q,
                   theta_count == 0 ? 0.0 : theta_ratio / theta_count);
    }
    for (cudaEvent_t e : events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
};

OrTiles::OrTiles(const DeviceIndex& device, size_t max_queries, size_t max_lists, uint64_t* candidate_keys,
                 TopkBuffers& fallback)
    : device_(device), max_queries_(std::max<size_t>(1, max_queries)), max_lists_(std::max<size_t>(1, max_lists)),
      candidate_keys_(candidate_keys), fallback_(fallback), buffers_(std::make_unique<Buffers>()),
      times_(std::make_unique<StageTimes>()) {
  if (max_queries_ > (size_t{1} << kQueryBits)) throw Error("OR tiles run at most 256 queries together");
  const uint32_t doc_count = device.host().doc_count();
  Buffers& b = *buffers_;
  b.tiles = (doc_count + kTile - 1) / kTile;
  b.slices = (doc_count + kSliceDocs - 1) / kSliceDocs;
  b.sparse_capacity = static_cast<uint32_t>(std::min<size_t>(max_lists_, std::max<size_t>(8, 4 * max_queries_)));
  if (b.tiles > kTileMask) throw Error("a partition of more than " + std::to_string(size_t{kTileMask} * kTile) + " documents");
  int gpu = 0, sms = 0, per_sm_128 = 0, per_sm_256 = 0;
  WARP_CUDA_CHECK(cudaGetDevice(&gpu));
  WARP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_128, second_pass_kernel<128>, 128, 0));
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_256, second_pass_kernel<256>, 256, 0));
  b.persistent_128 = static_cast<uint32_t>(sms * std::max(1, per_sm_128));
  b.persistent_256 = static_cast<uint32_t>(sms * std::max(1, per_sm_256));
  // The first pass, whose k-th best gives θ: about four waves of the GPU over the batch, 32 to 128
  // tiles a query, at most an eighth of the partition's tiles.
  b.first_capacity = static_cast<uint32_t>(std::min<size_t>(std::clamp<size_t>(4 * sms / max_queries_, 32, 128),
                                                              std::max<size_t>(1, b.tiles / 8)));
  const size_t q = max_queries_;
  const size_t input_bytes = carve_staging(nullptr, q, max_lists_).bytes;
  WARP_CUDA_CHECK(cudaMalloc(&b.inputs, input_bytes));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_inputs, input_bytes));
  device_alloc(b.sparse_maxima, size_t{b.sparse_capacity} * b.slices);
  b.sparse.capacity = b.slices / 4 + 1;  // is_sparse: fewer postings than a quarter of the slices
  b.sparse.tiles = b.tiles;
  device_alloc(b.sparse.docs, size_t{b.sparse_capacity} * b.sparse.capacity);
  device_alloc(b.sparse.scores, size_t{b.sparse_capacity} * b.sparse.capacity);
  device_alloc(b.sparse.tile_start, size_t{b.sparse_capacity} * b.tiles);
  device_alloc(b.slice_bounds, q * b.tiles * kSlicesPerTile);
  device_alloc(b.scratch, q);
  device_alloc(b.bounds, q * b.tiles);
  device_alloc(b.first_tiles, q * b.first_capacity);
  device_alloc(b.second_tiles, q * b.tiles);
  device_alloc(b.second_total, 1);
  device_alloc(b.staging, q * kSortCapacity);
  device_alloc(b.results, q * (kHeader + kSortCapacity));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_results, q * (kHeader + kSortCapacity) * sizeof(uint64_t)));
}

OrTiles::~OrTiles() = default;

std::vector<OrTileAnswer> OrTiles::run(std::span<const OrTileQuery> queries, cudaStream_t stream) {
  Buffers& b = *buffers_;
  const size_t n = queries.size();
  if (n > max_queries_) throw Error("too many queries for one OR tiles run");
  std::vector<OrTileAnswer> answers(n);
  const uint32_t doc_begin = device_.host().meta.doc_begin, doc_count = device_.host().doc_count();
  size_t list_total = 0;
  for (const OrTileQuery& query : queries) list_total += query.lists.size();
  if (list_total > max_lists_) throw Error("too many lists for one OR tiles run");
  const Staged host = carve_staging(b.host_inputs, n, list_total);
  const Staged dev = carve_staging(b.inputs, n, list_total);
  uint32_t lists = 0, block_size = 128, max_k = 1, sparse = 0, sparse_blocks = 0;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    host.queries[i] = {lists, static_cast<uint32_t>(queries[i].lists.size()), std::max<uint32_t>(1, queries[i].k), 0};
    for (const auto& [list, weight] : queries[i].lists) {
      block_size = list.block_size;
      host.sparse_slots[lists] = kDenseList;
      if (is_sparse(list, b.slices) && list.block_count > 0 && sparse < b.sparse_capacity) {
        host.sparse_slots[lists] = sparse;
        host.sparse[sparse++] = {list, sparse_blocks, host.sparse_slots[lists], static_cast<uint32_t>(i), weight};
        sparse_blocks += list.block_count;
      }
      host.weights[lists] = weight;
      host.lists[lists++] = list;
    }
    max_k = std::max(max_k, queries[i].k);
    any = any || (!queries[i].lists.empty() && queries[i].k > 0);
    answers[i].tiles_total = b.tiles;
  }
  if (!any || doc_count == 0) return answers;
  const uint32_t result_stride = kHeader + std::min(max_k, kSortCapacity);
  const uint32_t qn = static_cast<uint32_t>(n);
  times_->mark(0, stream);
  WARP_CUDA_CHECK(cudaMemsetAsync(b.scratch, 0, n * sizeof(QueryScratch), stream));
  WARP_CUDA_CHECK(cudaMemsetAsync(b.second_total, 0, sizeof(uint32_t), stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.inputs, b.host_inputs, host.bytes, cudaMemcpyHostToDevice, stream));
  const float* norms = device_.length_norms();
  if (sparse > 0) {
    WARP_CUDA_CHECK(cudaMemsetAsync(b.sparse_maxima, 0, size_t{sparse} * b.slices * sizeof(uint32_t), stream));
    if (block_size == 256) {
      sparse_maxima_kernel<256><<<sparse_blocks, 256, 0, stream>>>(dev.sparse, sparse, norms, doc_begin, b.slices, b.sparse_maxima, b.sparse, b.scratch);
    } else {
      sparse_maxima_kernel<128><<<sparse_blocks, 128, 0, stream>>>(dev.sparse, sparse, norms, doc_begin, b.slices, b.sparse_maxima, b.sparse, b.scratch);
    }
    WARP_CUDA_CHECK_LAUNCH();
  }
  const BoundInputs in{dev.lists, dev.sparse_slots, b.sparse_maxima, b.slices, doc_begin, doc_count, b.sparse, b.slice_bounds};
  tile_bound_kernel<<<dim3((b.tiles + 7) / 8, qn), 256, 0, stream>>>(dev.queries, in, b.tiles, b.bounds, b.scratch);
  WARP_CUDA_CHECK_LAUNCH();
  plan_kernel<<<qn, kPlanThreads, 0, stream>>>(b.bounds, b.tiles, b.first_capacity, b.first_tiles, b.scratch);
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(1, stream);
  const size_t key_stride = doc_count;
  const dim3 first_grid(b.first_capacity, qn);
  if (block_size == 256) {
    first_pass_kernel<256><<<first_grid, 256, 0, stream>>>(dev.queries, in, dev.weights, norms, b.first_tiles, b.first_capacity, candidate_keys_, key_stride, b.scratch);
  } else {
    first_pass_kernel<128><<<first_grid, 128, 0, stream>>>(dev.queries, in, dev.weights, norms, b.first_tiles, b.first_capacity, candidate_keys_, key_stride, b.scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(2, stream);
  // Rounds of the second pass: first the tiles whose bound passes θ by a margin (they would be
  // scored under any valid θ if the k-th best is that far above θ), then, with θ recomputed from
  // every candidate so far (near the k-th best), the rest.
  constexpr float kRoundFactors[] = {1.15f, 1.0f};
  for (size_t round = 0; round < std::size(kRoundFactors); ++round) {
    if (round > 0) WARP_CUDA_CHECK(cudaMemsetAsync(b.second_total, 0, sizeof(uint32_t), stream));
    theta_kernel<<<qn, kPlanThreads, 0, stream>>>(dev.queries, b.bounds, kRoundFactors[round], b.tiles, candidate_keys_,
                                                  key_stride, b.second_tiles, b.second_total, b.scratch);
    WARP_CUDA_CHECK_LAUNCH();
    if (round == 0) times_->mark(3, stream);
    if (block_size == 256) {
      second_pass_kernel<256><<<b.persistent_256, 256, 0, stream>>>(dev.queries, in, dev.weights, norms, b.second_tiles,
                                                                    b.second_total, candidate_keys_, key_stride, b.scratch);
    } else {
      second_pass_kernel<128><<<b.persistent_128, 128, 0, stream>>>(dev.queries, in, dev.weights, norms, b.second_tiles,
                                                                    b.second_total, candidate_keys_, key_stride, b.scratch);
    }
    WARP_CUDA_CHECK_LAUNCH();
  }
  times_->mark(4, stream);
  select_kernel<<<qn, kSortThreads, 0, stream>>>(dev.queries, candidate_keys_, key_stride, b.staging, b.scratch, b.results,
                                                 result_stride);
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(5, stream);
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.host_results, b.results, n * result_stride * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  times_->add(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* row = b.host_results + i * result_stride;
    OrTileAnswer& a = answers[i];
    a.blocks_decoded = row[2], a.postings_decoded = row[3], a.tiles_scored = static_cast<uint32_t>(row[4]);
    times_->tiles_scored += a.tiles_scored, times_->tiles_total += b.tiles;
    if (queries[i].k == 0 || queries[i].lists.empty()) continue;
    if (row[1] != 0) {  // too many keys at or above the k-th bucket for a block sort
      auto* scratch = b.scratch + i;
      a.hits = fallback_.select_candidates(candidate_keys_ + i * key_stride, &scratch->key_count, doc_count,
                                           scratch->key_buckets, queries[i].k, stream);
      continue;
    }
    const size_t take = std::min<size_t>(queries[i].k, row[0]);
    a.hits = keys_to_hits(row + kHeader, take);
    if (times_->on && take == queries[i].k) {
      const uint32_t bits = static_cast<uint32_t>(row[5]);
      float theta;
      std::memcpy(&theta, &bits, sizeof theta);
      times_->theta_ratio += theta / a.hits.back().score, ++times_->theta_count;
    }
  }
  return answers;
}

}  // namespace warp::gpu
