// The OR tiles' scoring (or_tiles.hpp): a tile's live slices and the blocks that overlap them
// decoded and scored in shared memory, the first pass (each tile's own top-k), the second pass
// (documents reaching θ) and the final selection.
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/or_tiles/or_tiles_engine.cuh"

namespace warp::gpu::or_tiles_engine {
namespace {

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

__device__ __forceinline__ bool in_live_slice(uint32_t live, uint32_t local) {
  return live >> (local / kSliceDocs) & 1u;
}

// One warp decodes a block of a list (warp_decode_postings) and adds the BM25 of its postings in
// live slices.
template <int BS>
__device__ void warp_score_block(const DeviceList& list, uint32_t block, float weight, const float* norms,
                                 uint32_t doc_begin, uint32_t tile_first, uint32_t tile_end, uint32_t live,
                                 float* scores, WarpScratch<BS>& scratch) {
  constexpr uint32_t kPerLane = BS / 32;
  uint32_t docs[kPerLane], freqs[kPerLane];
  const uint32_t n = warp_decode_postings<BS>(list, block, docs, freqs, scratch);
  const uint32_t lane = threadIdx.x & 31u;
  for (uint32_t j = 0; j < kPerLane; ++j) {
    const uint32_t local = docs[j] - doc_begin;
    if (WarpLayout<BS>::index(lane, j) < n && local >= tile_first && local < tile_end &&
        in_live_slice(live, local - tile_first)) {
      atomicAdd(&scores[local - tile_first], bm25_units_dev(weight, freqs[j], norms[local]));
    }
  }
}

// The blocks of up to 32 dense lists that overlap a tile, numbered across the lists so that the warps
// of a thread block share them out whatever the lists' lengths (shared memory).
struct TilePlan {
  uint32_t start[32];       // first block of each list overlapping the tile
  uint32_t prefix[32 + 1];  // items before each list
};

// Pass 2's order of work inside a tile (MaxScore, Turtle & Flood 1995, on the tile's bounds): the
// dense lists whose bounds over the tile's live slices sum below θ are non-essential — a document
// in none of the other lists cannot reach θ. The essential lists are scored first; then each
// non-essential list, largest bound first, has its blocks decoded only over the slices where some
// document's partial score plus the bounds of the lists still to come reaches θ (BlockMax-WAND's
// test, per slice instead of per document), so its other blocks are never decoded.
struct TileStages {
  float rest[kMaxStages][kSlicesPerTile];  // stage i, slice s: bounds of the lists of stages i.. in s
  uint32_t list[kMaxStages];               // stage i's list (its index in the query)
  uint32_t count;                          // stages; 0: every list essential
  uint32_t essential;                      // bit j: list j scored before the stages
  uint32_t need[kMaxStages];               // stage i's slices worth its decoding
};

// The smallest m over the warp and the lane holding it (ties: the lower lane), in every lane.
__device__ __forceinline__ void warp_min_lane(float& m, uint32_t& who) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, m, offset);
    const uint32_t other_who = __shfl_xor_sync(0xFFFFFFFFu, who, offset);
    if (other < m || (other == m && other_who < who)) m = other, who = other_who;
  }
}

// Warp 0, after `live` is known (lane s: slice s): the stages of a tile for a query of up to 32
// lists.
__device__ void plan_stages(const EngineQuery& q, const BoundInputs& in, uint32_t tile, uint32_t live, float theta,
                            TileStages& stages) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t slice = tile * kSlicesPerTile + lane;
  const bool in_live = live >> lane & 1u;
  // Lane l keeps list l's largest bound over the live slices; -1: a sparse list (always essential).
  float my_max = -1.0f;
  for (uint32_t l = 0; l < q.list_count; ++l) {
    const uint32_t at = q.list_begin + l;
    const bool sparse = in.sparse_slots[at] != kDenseList;
    float b = 0;
    if (!sparse && in_live) {
      b = list_slice_bound(in.lists[at], in.bound_scales[at], in.sparse_slots[at], in.sparse_maxima, in.slices, slice,
                           in.doc_begin, in.doc_count);
    }
    float m = b;
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
    if (lane == l) my_max = sparse ? -1.0f : m;
  }
  // Non-essential: the dense lists of smallest bounds while their sum stays below θ (rounding
  // slack against them), at most kMaxStages.
  uint32_t non_essential = 0;
  float sum = 0;
  for (uint32_t taken = 0; taken < kMaxStages; ++taken) {
    float m = lane < q.list_count && my_max >= 0 && !(non_essential >> lane & 1u) ? my_max : INFINITY;
    uint32_t who = lane;
    warp_min_lane(m, who);
    if (m == INFINITY || (sum + m) * kBoundSlack >= theta) break;
    sum += m;
    non_essential |= 1u << who;
  }
  // Stages: the non-essential lists, largest bound first, one each (all in one stage measured no
  // saving: the test gains from the exact scores of the lists before); rest[i] = the bounds of
  // stages i.. .
  const uint32_t count = __popc(non_essential);
  float rest = 0;
  uint32_t left = non_essential;
  for (uint32_t i = 0; i < count; ++i) {  // smallest first, so stage count-1-i
    float m = left >> lane & 1u ? my_max : INFINITY;
    uint32_t who = lane;
    warp_min_lane(m, who);
    left &= ~(1u << who);
    const uint32_t at = q.list_begin + who;
    if (in_live) {
      rest += list_slice_bound(in.lists[at], in.bound_scales[at], in.sparse_slots[at], in.sparse_maxima, in.slices,
                               slice, in.doc_begin, in.doc_count);
    }
    const uint32_t stage = count - 1 - i;
    stages.rest[stage][lane] = rest;
    if (lane == 0) stages.list[stage] = who, stages.need[stage] = 0;
  }
  if (lane == 0) {
    stages.count = count;
    stages.essential = (q.list_count >= 32 ? 0xFFFFFFFFu : (1u << q.list_count) - 1) & ~non_essential;
  }
}

// Warp 1 (one lane per list of the chunk of up to 32 from `chunk`): the chunk's dense lists' blocks
// overlapping the tile, numbered across the lists.
__device__ void plan_tile(const EngineQuery& q, const BoundInputs& in, uint32_t chunk, uint32_t tile,
                          uint32_t first_doc, uint32_t last_doc, bool last_tile, TilePlan& plan) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t in_chunk = min(32u, q.list_count - chunk);
  uint32_t start = 0, count = 0;
  if (lane < in_chunk) {
    const DeviceList& list = in.lists[q.list_begin + chunk + lane];
    const bool sparse = in.sparse_slots[q.list_begin + chunk + lane] != kDenseList;
    if (!sparse && list.block_count > 0) {
      const bool directory = list.tile_first_block != nullptr;
      start =
          directory ? list.tile_first_block[tile] : block_for_doc(list.block_last_docid, list.block_count, first_doc);
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
// θ). Blocks of dense lists go a block per warp (any codec: warp_decode.cuh), sparse lists'
// postings a thread each. With `stages` (pass 2, up to 32 lists) the non-essential lists are
// scored after the others and only where a document can still reach θ (TileStages): a document
// left out scores below θ, so what pass 2 keeps is unchanged. Sets `live` (shared); adds blocks
// and postings decoded to `counts` (shared). Every thread of the block calls it.
template <int BS>
__device__ void score_tile(const EngineQuery& q, uint32_t query, const BoundInputs& in, const float* weights,
                           const float* norms, uint32_t tile, float theta, bool first_pass, uint32_t& live,
                           float* scores, WarpScratch<BS>* scratch, TilePlan& plan, TileStages* stages,
                           StageOptions stage_options, uint32_t* counts) {
  const DeviceList* lists = in.lists;
  const uint32_t doc_begin = in.doc_begin;
  const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, in.doc_count);
  const uint32_t first_doc = doc_begin + tile_first, last_doc = doc_begin + tile_end - 1;
  const bool last_tile = tile_end == in.doc_count;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  // Stages for two dense lists or more: with one, its test adds little to the live slices' (a
  // slice's bound already holds each sparse list's exact maximum there).
  const bool staged = stages != nullptr && q.list_count <= 32 && q.dense_lists >= 2;  // uniform
  // At once: the live slices and the stages (warp 0), the first chunk's plan (warp 1).
  if (warp == 0) {
    const uint32_t mask = live_slices(in, query, tile, theta, first_pass);
    if (lane == 0) live = mask;
    if (staged) plan_stages(q, in, tile, mask, theta, *stages);
  } else if (warp == 1 && q.list_count > 0) {
    plan_tile(q, in, 0, tile, first_doc, last_doc, last_tile, plan);
  }
  __syncthreads();
  uint32_t blocks = 0, postings = 0;
  // A stage of few blocks in the tile is scored with the essential lists (its bounds still counted
  // in the earlier stages' tests: looser, still an upper bound).
  uint32_t essential = staged ? stages->essential : 0xFFFFFFFFu, skipped_stages = 0;
  if (staged) {
    for (uint32_t stage = 0; stage < stages->count; ++stage) {
      const uint32_t j = stages->list[stage];
      if (plan.prefix[j + 1] - plan.prefix[j] < stage_options.min_items)
        essential |= 1u << j, skipped_stages |= 1u << stage;
    }
  }
  // Items [from_item, to_item) of the chunk's plan whose list is in `list_mask` (bit j: list j of
  // the chunk): the blocks that overlap the slices of `mask`, a warp each.
  auto score_blocks = [&](uint32_t chunk, uint32_t from_item, uint32_t to_item, uint32_t list_mask, uint32_t mask) {
    for (uint32_t item = from_item + warp; item < to_item; item += BS / 32) {  // uniform per warp
      uint32_t j = 0;
      while (plan.prefix[j + 1] <= item) ++j;
      if (!(list_mask >> j & 1u)) continue;
      const DeviceList& list = lists[q.list_begin + chunk + j];
      const uint32_t block = plan.start[j] + (item - plan.prefix[j]);
      if (block > 0 && list.block_last_docid[block - 1] >= last_doc) continue;  // starts after the tile
      if (block_live_slices(list, block, first_doc, last_doc, mask) == 0) continue;
      warp_score_block<BS>(list, block, weights[q.list_begin + chunk + j], norms, doc_begin, tile_first, tile_end, mask,
                           scores, scratch[warp]);
      ++blocks, postings += min(static_cast<uint32_t>(BS), list.count - block * BS);
    }
  };
  for (uint32_t chunk = 0; chunk < q.list_count; chunk += 32) {
    const uint32_t in_chunk = min(32u, q.list_count - chunk);
    if (chunk > 0) {
      if (warp == 1) plan_tile(q, in, chunk, tile, first_doc, last_doc, last_tile, plan);
      __syncthreads();
    }
    // Staged: the essential lists here (a mask of lists), the others below.
    score_blocks(chunk, 0, plan.prefix[in_chunk], essential, live);
    for (uint32_t j = 0; j < in_chunk; ++j) {
      const DeviceList& list = lists[q.list_begin + chunk + j];
      const uint32_t slot = in.sparse_slots[q.list_begin + chunk + j];
      if (slot != kDenseList) {  // scored postings of a sparse list, a thread each
        const uint32_t* starts = in.sparse.tile_start + size_t{slot} * in.sparse.tiles;
        const uint32_t end = last_tile ? list.count : starts[tile + 1];
        for (uint32_t i = starts[tile] + threadIdx.x; i < end; i += BS) {
          const uint32_t local = in.sparse.docs[size_t{slot} * in.sparse.capacity + i] - first_doc;
          if (in_live_slice(live, local))
            atomicAdd(&scores[local], in.sparse.scores[size_t{slot} * in.sparse.capacity + i]);
        }
        continue;
      }
    }
    __syncthreads();  // the plan is rewritten by the next chunk; the scores are complete
  }
  if (staged) {
    uint32_t need = live;
    for (uint32_t stage = 0; stage < stages->count; ++stage) {
      if (skipped_stages >> stage & 1u) continue;  // uniform
      // The slices (of those still needed) where a document scored so far can reach θ with the
      // lists of this stage and after; a document with no score yet is in no essential list.
      uint32_t mine = 0;
      for_live<BS>(need, [&](uint32_t i) {
        const float s = scores[i];
        if (s > 0 && (s + stages->rest[stage][i / kSliceDocs]) * kBoundSlack >= theta) mine |= 1u << (i / kSliceDocs);
      });
      mine = __reduce_or_sync(0xFFFFFFFFu, mine);
      if (lane == 0 && mine != 0) atomicOr(&stages->need[stage], mine);
      __syncthreads();
      need = stages->need[stage];
      if (need == 0) break;  // uniform
      const uint32_t j = stages->list[stage];
      score_blocks(0, plan.prefix[j], plan.prefix[j + 1], 1u << j, need);
      __syncthreads();
    }
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
__global__ void __launch_bounds__(BS)
    first_pass_kernel(const EngineQuery* queries, const RunSizes* sizes, BoundInputs in, const float* weights,
                      const float* norms, const uint32_t* first_tiles, uint32_t capacity, uint64_t* keys,
                      size_t key_stride, QueryScratch* scratch) {
  constexpr uint32_t kPerThread = kBuckets / BS;
  using Scan = cub::BlockScan<uint32_t, BS>;
  __shared__ float scores[kTile];
  __shared__ uint32_t histogram[kBuckets];
  __shared__ WarpScratch<BS> warp_scratch[BS / 32];
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint64_t threshold;
  __shared__ uint32_t base, live, counts[2];
  __shared__ TilePlan plan;
  const uint32_t doc_begin = in.doc_begin, doc_count = in.doc_count;
  const uint32_t qi = blockIdx.y;
  if (qi >= sizes->queries) return;  // uniform
  QueryScratch& s = scratch[qi];
  if (blockIdx.x >= s.first_count) return;  // uniform
  const EngineQuery q = queries[qi];
  const uint32_t tid = threadIdx.x;
  const uint32_t tile = first_tiles[size_t{qi} * capacity + blockIdx.x];
  const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, doc_count);
  for (uint32_t b = tid; b < kBuckets; b += BS) histogram[b] = 0;
  for (uint32_t i = tid; i < kTile; i += BS) scores[i] = 0;
  if (tid == 0) counts[0] = counts[1] = 0;
  score_tile<BS>(q, qi, in, weights, norms, tile, 0, true, live, scores, warp_scratch, plan, nullptr, {}, counts);
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
  for_live<BS>(
      live, [&](uint32_t i) { keep += scores[i] > 0 && topk_key(scores[i], doc_begin + tile_first + i) >= threshold; });
  uint32_t offset, kept;
  Scan(scan_storage).ExclusiveSum(keep, offset, kept);
  if (tid == 0) base = kept == 0 ? 0 : atomicAdd(&s.key_count, kept);
  __syncthreads();
  uint64_t* row = keys + qi * key_stride;
  for_live<BS>(live, [&](uint32_t i) {
    if (scores[i] > 0) {
      const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
      if (key >= threshold && base + offset < key_stride) row[base + offset] = key;
      offset += key >= threshold;
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

// 5. Pass 2: persistent blocks over the batch's work list; a tile keeps its documents scoring at
// least θ (few: θ is near the k-th best). One pass over the tile's live scores keeps them (a warp's
// keepers take their places in the query's row with one atomic, in any order: the selection sorts)
// and zeroes the scores (a tile decodes only ~4 blocks on the GOV2-like preset at k = 1000, so
// each pass over its 4,096 scores counts). Blocks of 128 threads are bound to 56 registers, 9 resident
// per multiprocessor (64 registers: 8). H100, GOV2-like OR batched, against a count, a block scan
// and a second pass at 56 registers: top-1000 13.1k / 12.8k -> 13.9k / 13.7k q/s, top-10 44.3k /
// 44.6k -> 46.7k / 45.6k (one pass unbound: 13.4k / 12.8k).
template <int BS>
__global__ void __launch_bounds__(BS, BS == 128 ? 9 : 1)
    second_pass_kernel(const EngineQuery* queries, BoundInputs in, const float* weights, const float* norms,
                       const uint32_t* second_tiles, const uint32_t* second_total, uint64_t* keys, size_t key_stride,
                       bool staged, StageOptions stage_options, QueryScratch* scratch) {
  __shared__ float scores[kTile];
  __shared__ WarpScratch<BS> warp_scratch[BS / 32];
  __shared__ uint32_t live, counts[2];
  __shared__ TilePlan plan;
  __shared__ TileStages stages;
  const uint32_t doc_begin = in.doc_begin;
  const uint32_t total = *second_total;
  const uint32_t lane = threadIdx.x & 31u;
  for (uint32_t i = threadIdx.x; i < kTile; i += BS) scores[i] = 0;  // each tile leaves its live slices zeroed
  for (uint32_t item = blockIdx.x; item < total; item += gridDim.x) {
    const uint32_t work = second_tiles[item];
    const uint32_t qi = work >> (32 - kQueryBits), tile = work & kTileMask;
    QueryScratch& s = scratch[qi];
    const EngineQuery q = queries[qi];
    const uint32_t theta_bits = s.theta_bits;
    const uint32_t tile_first = tile * kTile;
    if (threadIdx.x == 0) counts[0] = counts[1] = 0;
    score_tile<BS>(q, qi, in, weights, norms, tile, __uint_as_float(theta_bits), false, live, scores, warp_scratch,
                   plan, staged ? &stages : nullptr, stage_options, counts);
    if (threadIdx.x == 0) {
      atomicAdd(&s.counters.blocks_decoded, static_cast<unsigned long long>(counts[0]));
      atomicAdd(&s.counters.postings_decoded, static_cast<unsigned long long>(counts[1]));
      atomicAdd(&s.tiles_scored, 1u);
    }
    uint64_t* row = keys + qi * key_stride;
    for_live<BS>(live, [&](uint32_t i) {
      const float score = scores[i];
      const bool keep = score > 0 && __float_as_uint(score) >= theta_bits;
      const uint32_t active = __activemask();
      const uint32_t keepers = __ballot_sync(active, keep);
      if (keepers != 0) {
        const uint32_t leader = __ffs(active) - 1;
        uint32_t base = 0;
        if (lane == leader) base = atomicAdd(&s.key_count, __popc(keepers));
        base = __shfl_sync(active, base, leader);
        if (keep) {
          const uint64_t key = topk_key(score, doc_begin + tile_first + i);
          const uint32_t at = base + __popc(keepers & ((1u << lane) - 1));
          if (at < key_stride) row[at] = key;  // else the query runs again alone
          atomicAdd(&s.key_buckets[key_bucket(key)], 1u);
        }
      }
      scores[i] = 0;  // the thread that read it: no barrier needed
    });
    __syncthreads();  // scores, live, counts and the plan are reused by the next tile
  }
}

// 6. One block per query: the bucket of the k-th best candidate, the keys at or above it gathered
// and sorted in the block; the row gets [selected, overflow, blocks, postings, tiles, θ, k best keys].
__global__ void __launch_bounds__(kSortThreads)
    select_kernel(const EngineQuery* queries, const RunSizes* sizes, const uint64_t* keys, size_t key_stride,
                  uint64_t* staging, const QueryScratch* scratch, uint64_t* results) {
  const uint32_t qi = blockIdx.x;
  if (qi >= sizes->queries) return;  // uniform
  const uint32_t result_stride = sizes->result_stride;
  const QueryScratch& s = scratch[qi];
  const uint32_t k = queries[qi].k;
  uint64_t* out = results + size_t{qi} * result_stride;
  uint32_t selected = 0;
  bool fits = true;
  if (s.key_count <= key_stride) {  // uniform; else the row lost keys and the query runs again alone
    fits = block_select(keys + qi * key_stride, s.key_count, s.key_buckets, k, staging + size_t{qi} * kSortCapacity,
                        out + kHeader, selected);
  }
  if (threadIdx.x == 0) {
    out[0] = selected, out[1] = !fits;
    out[2] = s.counters.blocks_decoded, out[3] = s.counters.postings_decoded, out[4] = s.tiles_scored;
    out[5] = s.theta_bits, out[6] = s.key_count;
  }
}

}  // namespace

void launch_first_pass(uint32_t block_size, dim3 grid, const EngineQuery* queries, const RunSizes* sizes,
                       const BoundInputs& in, const float* weights, const float* norms, const uint32_t* first_tiles,
                       uint32_t capacity, uint64_t* keys, size_t key_stride, QueryScratch* scratch,
                       cudaStream_t stream) {
  if (block_size == 256) {
    first_pass_kernel<256><<<grid, 256, 0, stream>>>(queries, sizes, in, weights, norms, first_tiles, capacity, keys,
                                                     key_stride, scratch);
  } else {
    first_pass_kernel<128><<<grid, 128, 0, stream>>>(queries, sizes, in, weights, norms, first_tiles, capacity, keys,
                                                     key_stride, scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_second_pass(uint32_t block_size, uint32_t grid, const EngineQuery* queries, const BoundInputs& in,
                        const float* weights, const float* norms, const uint32_t* second_tiles,
                        const uint32_t* second_total, uint64_t* keys, size_t key_stride, bool staged,
                        StageOptions stage_options, QueryScratch* scratch, cudaStream_t stream) {
  if (block_size == 256) {
    second_pass_kernel<256><<<grid, 256, 0, stream>>>(queries, in, weights, norms, second_tiles, second_total, keys,
                                                      key_stride, staged, stage_options, scratch);
  } else {
    second_pass_kernel<128><<<grid, 128, 0, stream>>>(queries, in, weights, norms, second_tiles, second_total, keys,
                                                      key_stride, staged, stage_options, scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_select(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, const uint64_t* keys,
                   size_t key_stride, uint64_t* staging, const QueryScratch* scratch, uint64_t* results,
                   cudaStream_t stream) {
  select_kernel<<<queries, kSortThreads, 0, stream>>>(query_list, sizes, keys, key_stride, staging, scratch, results);
  WARP_CUDA_CHECK_LAUNCH();
}

void second_pass_occupancy(int& per_sm_128, int& per_sm_256) {
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_128, second_pass_kernel<128>, 128, 0));
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_256, second_pass_kernel<256>, 256, 0));
}

}  // namespace warp::gpu::or_tiles_engine
