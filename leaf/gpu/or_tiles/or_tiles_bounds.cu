// The OR tiles' bounds (or_tiles.hpp): the sparse lists' exact slice maxima, tile and slice
// bounds, the plan of the first pass, and θ with the second pass's work list.
#include <cub/block/block_scan.cuh>

#include "common/util/cuda_check.cuh"
#include "leaf/gpu/or_tiles/or_tiles_engine.cuh"

namespace warp::gpu::or_tiles_engine {
namespace {

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

void launch_sparse_maxima(uint32_t block_size, uint32_t grid, const SparseList* sparse, const RunSizes* sizes,
                          const float* norms, uint32_t doc_begin, uint32_t slices, uint32_t* sparse_maxima,
                          SparsePostings out, QueryScratch* scratch, cudaStream_t stream) {
  if (block_size == 256) {
    sparse_maxima_kernel<256>
        <<<grid, 256, 0, stream>>>(sparse, sizes, norms, doc_begin, slices, sparse_maxima, out, scratch);
  } else {
    sparse_maxima_kernel<128>
        <<<grid, 128, 0, stream>>>(sparse, sizes, norms, doc_begin, slices, sparse_maxima, out, scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_tile_bounds(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, const BoundInputs& in,
                        uint32_t tiles, float* bounds, QueryScratch* scratch, cudaStream_t stream) {
  tile_bound_kernel<<<dim3((tiles + 7) / 8, queries), 256, 0, stream>>>(query_list, sizes, in, tiles, bounds, scratch);
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_plan(uint32_t queries, const RunSizes* sizes, float* bounds, uint32_t tiles, uint32_t capacity,
                 uint32_t* first_tiles, QueryScratch* scratch, cudaStream_t stream) {
  plan_kernel<<<queries, kPlanThreads, 0, stream>>>(sizes, bounds, tiles, capacity, first_tiles, scratch);
  WARP_CUDA_CHECK_LAUNCH();
}

void launch_theta(uint32_t queries, const EngineQuery* query_list, const RunSizes* sizes, float* bounds, uint32_t round,
                  uint32_t rank, uint32_t tiles, const uint64_t* keys, size_t key_stride, uint32_t* second_tiles,
                  uint32_t* second_total, QueryScratch* scratch, cudaStream_t stream) {
  theta_kernel<<<queries, kPlanThreads, 0, stream>>>(query_list, sizes, bounds, round, rank, tiles, keys, key_stride,
                                                     second_tiles, second_total, scratch);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu::or_tiles_engine
