#include "leaf/gpu/or_tiles.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <string>

#include "common/util/status.hpp"
#include "leaf/gpu/cuda_check.cuh"
#include "leaf/gpu/list_decode.cuh"

namespace warp::gpu {
namespace {

constexpr uint32_t kTile = OrTiles::kTileDocs;
// Block maxima are the CPU's float arithmetic and a GPU score sums in another order: a tile is
// skipped only when its bound is below θ by more than rounding can explain.
constexpr float kBoundSlack = 1.0f + 1e-4f;
constexpr uint32_t kPlanThreads = 1024;
constexpr uint32_t kSortThreads = 512, kSortItems = 8, kSortCapacity = kSortThreads * kSortItems;
constexpr uint32_t kHeader = 5;      // a result row: selected, overflow, blocks, postings, tiles scored; then keys
constexpr uint32_t kQueryBits = 8;   // a second-pass work item: query << 24 | tile
constexpr uint32_t kTileMask = (1u << (32 - kQueryBits)) - 1;

struct EngineQuery {
  uint32_t list_begin, list_count, k, pad;
};

// A list too sparse for its block maxima to bound a tile (a block spans more documents than a
// tile holds on average): decoded whole, its exact maximum per tile goes to row `slot` of the
// tile maxima.
struct SparseList {
  DeviceList list;
  uint32_t block_begin;  // first thread block of the launch that decodes it
  uint32_t slot;
  uint32_t query;
  float weight;
};

// A list is sparse when it holds fewer than a block's postings per tile on average.
bool is_sparse(const DeviceList& list, uint32_t doc_count) {
  return uint64_t{list.count} * kTile < uint64_t{list.block_size} * doc_count;
}

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

// The bucket of counts[0..kBuckets) (highest bucket = best) that holds the rank-th best (rank >= 1)
// and how many lie above it; false when there are fewer than rank. Every thread of the block calls it.
template <int THREADS>
__device__ bool find_rank(const uint32_t* counts, uint32_t rank, uint32_t& bucket, uint32_t& above) {
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
  __syncthreads();  // the storage may be used again
  return total >= rank;
}

// 1a. One thread block per block of every sparse list: its postings' BM25 scores, maxima per tile
// (float bits: positive floats order as integers).
template <int BS>
__global__ void __launch_bounds__(BS) sparse_maxima_kernel(const SparseList* sparse, uint32_t count, const float* norms,
                                                           uint32_t doc_begin, uint32_t tiles, uint32_t* tile_maxima,
                                                           QueryScratch* scratch) {
  __shared__ uint32_t index;
  __shared__ BlockDecodeStorage<BS> storage;
  if (threadIdx.x == 0) {  // the last list starting at or before this thread block
    uint32_t lo = 0, hi = count - 1;
    while (lo < hi) {
      const uint32_t mid = (lo + hi + 1) / 2;
      if (sparse[mid].block_begin <= blockIdx.x) lo = mid; else hi = mid - 1;
    }
    index = lo;
  }
  __syncthreads();
  const SparseList& task = sparse[index];
  const uint32_t block = blockIdx.x - task.block_begin;
  const uint32_t n = min(static_cast<uint32_t>(BS), task.list.count - block * BS);
  uint32_t doc, freq;
  decode_postings<BS>(task.list, block, n, storage, doc, freq);
  if (threadIdx.x < n) {
    const uint32_t local = doc - doc_begin;
    atomicMax(&tile_maxima[size_t{task.slot} * tiles + local / kTile], __float_as_uint(bm25_dev(task.weight, freq, norms[local])));
  }
  if (threadIdx.x == 0) {
    atomicAdd(&scratch[task.query].counters.blocks_decoded, 1ull);
    atomicAdd(&scratch[task.query].counters.postings_decoded, static_cast<unsigned long long>(n));
  }
}

// 1b. One thread per (tile, query): the sum over the query's lists of a bound of the list's
// scores in the tile: the exact maximum for a sparse list, else the largest block-max among the
// blocks whose docID range overlaps the tile.
__global__ void tile_bound_kernel(const EngineQuery* queries, const DeviceList* lists, const uint32_t* sparse_slots,
                                  const uint32_t* tile_maxima, uint32_t doc_begin, uint32_t doc_count, uint32_t tiles,
                                  float* bounds, QueryScratch* scratch) {
  const uint32_t tile = blockIdx.x * blockDim.x + threadIdx.x;
  if (tile >= tiles) return;
  const EngineQuery q = queries[blockIdx.y];
  const uint32_t first = doc_begin + tile * kTile;
  const uint32_t last = doc_begin + min((tile + 1) * kTile, doc_count) - 1;
  float bound = 0;
  for (uint32_t l = 0; l < q.list_count; ++l) {
    const uint32_t slot = sparse_slots[q.list_begin + l];
    if (slot != kDenseList) {
      bound += __uint_as_float(tile_maxima[size_t{slot} * tiles + tile]);
      continue;
    }
    const DeviceList& list = lists[q.list_begin + l];
    float best = 0;
    for (uint32_t b = block_for_doc(list.block_last_docid, list.block_count, first); b < list.block_count; ++b) {
      if (b > 0 && list.block_last_docid[b - 1] >= last) break;  // block b starts after the tile
      best = fmaxf(best, list.block_max_score[b]);
      if (list.block_last_docid[b] >= last) break;
    }
    bound += best;
  }
  bounds[size_t{blockIdx.y} * tiles + tile] = bound;
  if (bound > 0) atomicAdd(&scratch[blockIdx.y].bound_buckets[float_bucket(bound)], 1u);
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

// Scores one tile: decodes every block of the query's lists that overlaps it and adds BM25 into
// scores[0..kTile) (shared). Every thread of the block calls it.
template <int BS>
__device__ void score_tile(const EngineQuery& q, const DeviceList* lists, const float* weights, const float* norms,
                           uint32_t doc_begin, uint32_t tile_first, uint32_t tile_end, float* scores,
                           BlockDecodeStorage<BS>& storage, uint32_t& blocks, uint32_t& postings) {
  for (uint32_t i = threadIdx.x; i < kTile; i += BS) scores[i] = 0;
  __syncthreads();
  const uint32_t first_doc = doc_begin + tile_first, last_doc = doc_begin + tile_end - 1;
  for (uint32_t l = 0; l < q.list_count; ++l) {
    const DeviceList& list = lists[q.list_begin + l];
    const float weight = weights[q.list_begin + l];
    for (uint32_t block = block_for_doc(list.block_last_docid, list.block_count, first_doc); block < list.block_count;
         ++block) {  // uniform over the thread block
      if (block > 0 && list.block_last_docid[block - 1] >= last_doc) break;
      const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
      uint32_t doc, freq;
      decode_postings<BS>(list, block, n, storage, doc, freq);
      const uint32_t local = doc - doc_begin;
      if (threadIdx.x < n && local >= tile_first && local < tile_end) {
        atomicAdd(&scores[local - tile_first], bm25_dev(weight, freq, norms[local]));
      }
      __syncthreads();  // decode_postings reuses its storage
      ++blocks, postings += n;
      if (list.block_last_docid[block] >= last_doc) break;
    }
  }
  __syncthreads();
}

// 3. Pass 1, one block per (first-pass tile, query): the tile's own top-k become candidates (a
// shared histogram of its scores, the bucket of its k-th best, a compaction of the keys at or
// above it); the kept buckets are added to the query's key histogram.
template <int BS>
__global__ void __launch_bounds__(BS) first_pass_kernel(const EngineQuery* queries, const DeviceList* lists,
                                                        const float* weights, const float* norms, uint32_t doc_begin,
                                                        uint32_t doc_count, const uint32_t* first_tiles,
                                                        uint32_t capacity, uint64_t* keys, size_t key_stride,
                                                        QueryScratch* scratch) {
  constexpr uint32_t kPerThread = kBuckets / BS;
  using Scan = cub::BlockScan<uint32_t, BS>;
  __shared__ float scores[kTile];
  __shared__ uint32_t histogram[kBuckets];
  __shared__ BlockDecodeStorage<BS> storage;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint64_t threshold;
  __shared__ uint32_t base;
  const uint32_t qi = blockIdx.y;
  QueryScratch& s = scratch[qi];
  if (blockIdx.x >= s.first_count) return;  // uniform
  const EngineQuery q = queries[qi];
  const uint32_t tid = threadIdx.x;
  const uint32_t tile = first_tiles[size_t{qi} * capacity + blockIdx.x];
  const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, doc_count);
  for (uint32_t b = tid; b < kBuckets; b += BS) histogram[b] = 0;
  uint32_t blocks = 0, postings = 0;
  score_tile<BS>(q, lists, weights, norms, doc_begin, tile_first, tile_end, scores, storage, blocks, postings);
  for (uint32_t i = tid; i < kTile; i += BS) {
    if (scores[i] > 0) atomicAdd(&histogram[float_bucket(scores[i])], 1u);
  }
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
  for (uint32_t i = tid; i < kTile; i += BS) {
    keep += scores[i] > 0 && topk_key(scores[i], doc_begin + tile_first + i) >= threshold;
  }
  uint32_t offset, kept;
  Scan(scan_storage).ExclusiveSum(keep, offset, kept);
  if (tid == 0) base = kept == 0 ? 0 : atomicAdd(&s.key_count, kept);
  __syncthreads();
  uint64_t* row = keys + qi * key_stride;
  for (uint32_t i = tid; i < kTile; i += BS) {
    if (scores[i] > 0) {
      const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
      if (key >= threshold) row[base + offset++] = key;
    }
  }
  for (uint32_t b = key_bucket(threshold) + tid; b < kBuckets; b += BS) {
    if (histogram[b] != 0) atomicAdd(&s.key_buckets[b], histogram[b]);
  }
  if (tid == 0) {
    atomicAdd(&s.counters.blocks_decoded, static_cast<unsigned long long>(blocks));
    atomicAdd(&s.counters.postings_decoded, static_cast<unsigned long long>(postings));
    atomicAdd(&s.tiles_scored, 1u);
  }
}

// 4. One block per query: θ from the first pass's candidates (the bucket of the k-th best key,
// then a histogram of that bucket's keys by their next 12 bits), and the query's second-pass tiles
// (not in the first pass, bound reaching θ) appended to the batch's work list.
__global__ void __launch_bounds__(kPlanThreads) theta_kernel(const EngineQuery* queries, const float* bounds,
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
  const float theta = __uint_as_float(theta_bits);
  const float* row = bounds + size_t{qi} * tiles;
  uint32_t mine = 0;
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) mine += row[t] > 0 && row[t] * kBoundSlack >= theta;
  if (mine != 0) atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) {
    base = count == 0 ? 0 : atomicAdd(second_total, count);
    s.theta_bits = theta_bits;
  }
  __syncthreads();
  for (uint32_t t = threadIdx.x; t < tiles; t += kPlanThreads) {
    if (row[t] > 0 && row[t] * kBoundSlack >= theta) second_tiles[base + atomicAdd(&cursor, 1u)] = qi << (32 - kQueryBits) | t;
  }
}

// 5. Pass 2: persistent blocks over the batch's work list; a tile keeps its documents scoring at
// least θ (few: θ is near the k-th best).
template <int BS>
__global__ void __launch_bounds__(BS) second_pass_kernel(const EngineQuery* queries, const DeviceList* lists,
                                                         const float* weights, const float* norms, uint32_t doc_begin,
                                                         uint32_t doc_count, const uint32_t* second_tiles,
                                                         const uint32_t* second_total, uint64_t* keys,
                                                         size_t key_stride, QueryScratch* scratch) {
  using Scan = cub::BlockScan<uint32_t, BS>;
  __shared__ float scores[kTile];
  __shared__ BlockDecodeStorage<BS> storage;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t base;
  const uint32_t total = *second_total;
  for (uint32_t item = blockIdx.x; item < total; item += gridDim.x) {
    const uint32_t work = second_tiles[item];
    const uint32_t qi = work >> (32 - kQueryBits), tile = work & kTileMask;
    QueryScratch& s = scratch[qi];
    const EngineQuery q = queries[qi];
    const uint32_t theta_bits = s.theta_bits;
    const uint32_t tile_first = tile * kTile, tile_end = min(tile_first + kTile, doc_count);
    uint32_t blocks = 0, postings = 0;
    score_tile<BS>(q, lists, weights, norms, doc_begin, tile_first, tile_end, scores, storage, blocks, postings);
    uint32_t keep = 0;
    for (uint32_t i = threadIdx.x; i < kTile; i += BS) keep += scores[i] > 0 && __float_as_uint(scores[i]) >= theta_bits;
    uint32_t offset, kept;
    Scan(scan_storage).ExclusiveSum(keep, offset, kept);
    if (threadIdx.x == 0) {
      base = kept == 0 ? 0 : atomicAdd(&s.key_count, kept);
      atomicAdd(&s.counters.blocks_decoded, static_cast<unsigned long long>(blocks));
      atomicAdd(&s.counters.postings_decoded, static_cast<unsigned long long>(postings));
      atomicAdd(&s.tiles_scored, 1u);
    }
    __syncthreads();
    uint64_t* row = keys + qi * key_stride;
    for (uint32_t i = threadIdx.x; i < kTile; i += BS) {
      if (scores[i] > 0 && __float_as_uint(scores[i]) >= theta_bits) {
        const uint64_t key = topk_key(scores[i], doc_begin + tile_first + i);
        row[base + offset++] = key;
        atomicAdd(&s.key_buckets[key_bucket(key)], 1u);
      }
    }
    __syncthreads();  // scores and base are reused by the next tile
  }
}

// 6. One block per query: the bucket of the k-th best candidate, the keys at or above it gathered
// and sorted in the block; the row gets [selected, overflow, blocks, postings, tiles, k best keys].
__global__ void __launch_bounds__(kSortThreads) select_kernel(const EngineQuery* queries, const uint64_t* keys,
                                                              size_t key_stride, uint64_t* staging,
                                                              const QueryScratch* scratch, uint64_t* results,
                                                              uint32_t result_stride) {
  const uint32_t qi = blockIdx.x;
  const QueryScratch& s = scratch[qi];
  const uint32_t k = queries[qi].k;
  uint64_t* out = results + size_t{qi} * result_stride;
  uint64_t* stage = staging + size_t{qi} * kSortCapacity;
  const uint32_t n = s.key_count;
  uint32_t bucket, above;
  uint64_t threshold = 1;
  uint32_t selected = n;
  if (find_rank<kSortThreads>(s.key_buckets, k, bucket, above) && bucket > 0) {
    threshold = static_cast<uint64_t>(bucket) << (63 - kBucketBits);
    selected = above + s.key_buckets[bucket];
  }
  if (threadIdx.x == 0) {
    out[0] = selected, out[1] = selected > kSortCapacity;
    out[2] = s.counters.blocks_decoded, out[3] = s.counters.postings_decoded, out[4] = s.tiles_scored;
  }
  if (selected > kSortCapacity) return;  // uniform
  __shared__ uint32_t cursor;
  if (threadIdx.x == 0) cursor = 0;
  __syncthreads();
  const uint64_t* row = keys + qi * key_stride;
  for (uint32_t i = threadIdx.x; i < n; i += kSortThreads) {
    if (row[i] >= threshold) stage[atomicAdd(&cursor, 1u)] = row[i];
  }
  __syncthreads();
  using Sort = cub::BlockRadixSort<uint64_t, kSortThreads, kSortItems>;
  __shared__ typename Sort::TempStorage sort_storage;
  uint64_t sorted[kSortItems];
  for (uint32_t i = 0; i < kSortItems; ++i) {
    const uint32_t index = threadIdx.x * kSortItems + i;
    sorted[i] = index < selected ? stage[index] : 0;
  }
  Sort(sort_storage).SortDescending(sorted);  // blocked: thread t holds ranks t * items ..
  for (uint32_t i = 0; i < kSortItems; ++i) {
    const uint32_t rank = threadIdx.x * kSortItems + i;
    if (rank < k && rank < selected) out[kHeader + rank] = sorted[i];
  }
}

Hit key_to_hit(uint64_t key) {
  const uint32_t bits = static_cast<uint32_t>(key >> 32);
  float score;
  std::memcpy(&score, &bits, sizeof score);
  return {0xFFFFFFFFu - static_cast<uint32_t>(key), score};
}

template <class T>
void device_alloc(T*& p, size_t count) {
  WARP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
}

}  // namespace

struct OrTiles::Buffers {
  uint32_t tiles = 0, first_capacity = 0, persistent_128 = 0, persistent_256 = 0;
  EngineQuery* queries = nullptr;
  DeviceList* lists = nullptr;
  uint32_t* sparse_slots = nullptr;  // per list: its row of tile maxima, or kDenseList
  SparseList* sparse = nullptr;
  uint32_t* tile_maxima = nullptr;   // max_lists × tiles
  float* weights = nullptr;
  QueryScratch* scratch = nullptr;
  float* bounds = nullptr;
  uint32_t* first_tiles = nullptr;
  uint32_t* second_tiles = nullptr;
  uint32_t* second_total = nullptr;
  uint64_t* staging = nullptr;
  uint64_t* results = nullptr;
  EngineQuery* host_queries = nullptr;  // pinned
  DeviceList* host_lists = nullptr;
  uint32_t* host_sparse_slots = nullptr;
  SparseList* host_sparse = nullptr;
  float* host_weights = nullptr;
  uint64_t* host_results = nullptr;
  ~Buffers() {
    for (void* p : {(void*)queries, (void*)lists, (void*)sparse_slots, (void*)sparse, (void*)tile_maxima, (void*)weights, (void*)scratch, (void*)bounds, (void*)first_tiles,
                    (void*)second_tiles, (void*)second_total, (void*)staging, (void*)results}) {
      cudaFree(p);
    }
    for (void* p : {(void*)host_queries, (void*)host_lists, (void*)host_sparse_slots, (void*)host_sparse,
                    (void*)host_weights, (void*)host_results}) {
      cudaFreeHost(p);
    }
  }
};

// With WARP_GPU_STAGE_TIMES set, CUDA events around the stages; the mean per query and the tiles
// scored go to stderr when the object is destroyed.
struct OrTiles::StageTimes {
  static constexpr int kMarks = 6;
  bool on = std::getenv("WARP_GPU_STAGE_TIMES") != nullptr;
  cudaEvent_t events[kMarks] = {};
  double total_ms[kMarks - 1] = {};
  uint64_t queries = 0, tiles_scored = 0, tiles_total = 0;
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
                   "select %.1f; tiles scored %.1f%% (%.0f of %.0f per query)\n",
                   static_cast<unsigned long long>(queries), total_ms[0] * 1e3 / q, total_ms[1] * 1e3 / q,
                   total_ms[2] * 1e3 / q, total_ms[3] * 1e3 / q, total_ms[4] * 1e3 / q,
                   tiles_total == 0 ? 0.0 : 100.0 * tiles_scored / tiles_total, tiles_scored / q, tiles_total / q);
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
  if (b.tiles > kTileMask) throw Error("a partition of more than " + std::to_string(size_t{kTileMask} * kTile) + " documents");
  int gpu = 0, sms = 0, per_sm_128 = 0, per_sm_256 = 0;
  WARP_CUDA_CHECK(cudaGetDevice(&gpu));
  WARP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_128, second_pass_kernel<128>, 128, 0));
  WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_256, second_pass_kernel<256>, 256, 0));
  b.persistent_128 = static_cast<uint32_t>(sms * std::max(1, per_sm_128));
  b.persistent_256 = static_cast<uint32_t>(sms * std::max(1, per_sm_256));
  // The first pass: about two waves of the GPU over the batch, at most an eighth of the tiles,
  // 8 to 128 tiles a query.
  b.first_capacity = static_cast<uint32_t>(std::clamp<size_t>(std::min<size_t>(2 * sms / max_queries_, b.tiles / 8), 8, 128));
  const size_t q = max_queries_;
  device_alloc(b.queries, q);
  device_alloc(b.lists, max_lists_);
  device_alloc(b.sparse_slots, max_lists_);
  device_alloc(b.sparse, max_lists_);
  device_alloc(b.tile_maxima, max_lists_ * b.tiles);
  device_alloc(b.weights, max_lists_);
  device_alloc(b.scratch, q);
  device_alloc(b.bounds, q * b.tiles);
  device_alloc(b.first_tiles, q * b.first_capacity);
  device_alloc(b.second_tiles, q * b.tiles);
  device_alloc(b.second_total, 1);
  device_alloc(b.staging, q * kSortCapacity);
  device_alloc(b.results, q * (kHeader + kSortCapacity));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_queries, q * sizeof(EngineQuery)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_lists, max_lists_ * sizeof(DeviceList)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_sparse_slots, max_lists_ * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_sparse, max_lists_ * sizeof(SparseList)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_weights, max_lists_ * sizeof(float)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_results, q * (kHeader + kSortCapacity) * sizeof(uint64_t)));
}

OrTiles::~OrTiles() = default;

std::vector<OrTileAnswer> OrTiles::run(std::span<const OrTileQuery> queries, cudaStream_t stream) {
  Buffers& b = *buffers_;
  const size_t n = queries.size();
  if (n > max_queries_) throw Error("too many queries for one OR tiles run");
  std::vector<OrTileAnswer> answers(n);
  const uint32_t doc_begin = device_.host().meta.doc_begin, doc_count = device_.host().doc_count();
  uint32_t lists = 0, block_size = 128, max_k = 1, sparse = 0, sparse_blocks = 0;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (lists + queries[i].lists.size() > max_lists_) throw Error("too many lists for one OR tiles run");
    b.host_queries[i] = {lists, static_cast<uint32_t>(queries[i].lists.size()), std::max<uint32_t>(1, queries[i].k), 0};
    for (const auto& [list, weight] : queries[i].lists) {
      block_size = list.block_size;
      b.host_sparse_slots[lists] = kDenseList;
      if (is_sparse(list, doc_count) && list.block_count > 0) {
        b.host_sparse_slots[lists] = sparse;
        b.host_sparse[sparse++] = {list, sparse_blocks, b.host_sparse_slots[lists], static_cast<uint32_t>(i), weight};
        sparse_blocks += list.block_count;
      }
      b.host_weights[lists] = weight;
      b.host_lists[lists++] = list;
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
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.queries, b.host_queries, n * sizeof(EngineQuery), cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.lists, b.host_lists, lists * sizeof(DeviceList), cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.sparse_slots, b.host_sparse_slots, lists * sizeof(uint32_t), cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.weights, b.host_weights, lists * sizeof(float), cudaMemcpyHostToDevice, stream));
  const float* norms = device_.length_norms();
  if (sparse > 0) {
    WARP_CUDA_CHECK(cudaMemsetAsync(b.tile_maxima, 0, size_t{sparse} * b.tiles * sizeof(uint32_t), stream));
    WARP_CUDA_CHECK(cudaMemcpyAsync(b.sparse, b.host_sparse, sparse * sizeof(SparseList), cudaMemcpyHostToDevice, stream));
    if (block_size == 256) {
      sparse_maxima_kernel<256><<<sparse_blocks, 256, 0, stream>>>(b.sparse, sparse, norms, doc_begin, b.tiles, b.tile_maxima, b.scratch);
    } else {
      sparse_maxima_kernel<128><<<sparse_blocks, 128, 0, stream>>>(b.sparse, sparse, norms, doc_begin, b.tiles, b.tile_maxima, b.scratch);
    }
    WARP_CUDA_CHECK_LAUNCH();
  }
  tile_bound_kernel<<<dim3((b.tiles + 255) / 256, qn), 256, 0, stream>>>(b.queries, b.lists, b.sparse_slots, b.tile_maxima,
                                                                        doc_begin, doc_count, b.tiles, b.bounds, b.scratch);
  WARP_CUDA_CHECK_LAUNCH();
  plan_kernel<<<qn, kPlanThreads, 0, stream>>>(b.bounds, b.tiles, b.first_capacity, b.first_tiles, b.scratch);
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(1, stream);
  const size_t key_stride = doc_count;
  const dim3 first_grid(b.first_capacity, qn);
  if (block_size == 256) {
    first_pass_kernel<256><<<first_grid, 256, 0, stream>>>(b.queries, b.lists, b.weights, norms, doc_begin, doc_count,
                                                           b.first_tiles, b.first_capacity, candidate_keys_, key_stride, b.scratch);
  } else {
    first_pass_kernel<128><<<first_grid, 128, 0, stream>>>(b.queries, b.lists, b.weights, norms, doc_begin, doc_count,
                                                           b.first_tiles, b.first_capacity, candidate_keys_, key_stride, b.scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(2, stream);
  theta_kernel<<<qn, kPlanThreads, 0, stream>>>(b.queries, b.bounds, b.tiles, candidate_keys_, key_stride, b.second_tiles,
                                                b.second_total, b.scratch);
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(3, stream);
  if (block_size == 256) {
    second_pass_kernel<256><<<b.persistent_256, 256, 0, stream>>>(b.queries, b.lists, b.weights, norms, doc_begin, doc_count,
                                                                  b.second_tiles, b.second_total, candidate_keys_,
                                                                  key_stride, b.scratch);
  } else {
    second_pass_kernel<128><<<b.persistent_128, 128, 0, stream>>>(b.queries, b.lists, b.weights, norms, doc_begin, doc_count,
                                                                  b.second_tiles, b.second_total, candidate_keys_,
                                                                  key_stride, b.scratch);
  }
  WARP_CUDA_CHECK_LAUNCH();
  times_->mark(4, stream);
  select_kernel<<<qn, kSortThreads, 0, stream>>>(b.queries, candidate_keys_, key_stride, b.staging, b.scratch, b.results,
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
    for (size_t r = 0; r < take; ++r) a.hits.push_back(key_to_hit(row[kHeader + r]));
  }
  return answers;
}

}  // namespace warp::gpu
