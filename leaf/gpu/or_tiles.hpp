// OR top-k by document tiles with block-max pruning, for one query (a lane) or a PARA batch.
//
// Dense per-document accumulators (Ding et al. §8.3) cost passes over 4 bytes × N documents per
// query and score every posting; the CPU's BlockMax-WAND decodes a fifth of the blocks instead.
// Here a tile of consecutive documents is the unit of work and of pruning:
//   1. bounds  one thread per (query, tile): the tile's upper bound, the sum over the query's lists
//              of the largest block-max among the blocks overlapping it (no decoding);
//   2. plan    one thread block per query: the tiles with the highest bounds (a histogram of the
//              bounds by the selection's key buckets) form the first pass;
//   3. pass 1  one thread block per first-pass tile: decodes the blocks overlapping its tile,
//              adds BM25 into the tile's accumulators in shared memory and keeps the tile's own
//              top-k as candidates;
//   4. theta   one thread block per query: θ, a lower bound on the k-th best score (two-level
//              histogram of the candidates' keys: 16 mantissa bits), and the second pass's tiles:
//              those whose bound (with slack for float rounding) reaches θ;
//   5. pass 2  persistent thread blocks over the second-pass tiles of every query; a tile keeps
//              its documents scoring at least θ;
//   6. select  one thread block per query: the bucket of the k-th best, a block sort of the keys
//              at or above it; the k best keys of every query come back in one copy.
// Every document that can be in the top-k (score >= the k-th best >= θ) lies in a tile of one of
// the passes, its score is complete inside its tile, and it is kept: the answer is exact. Scores
// bigger than a block sort (k near 10,000) fall back to TopkBuffers::select_candidates.
#pragma once
#include <cuda_runtime.h>

#include <span>
#include <utility>
#include <vector>

#include "leaf/gpu/device_index.hpp"
#include "leaf/gpu/topk_select.cuh"

namespace warp::gpu {

struct OrTileQuery {
  std::span<const std::pair<DeviceList, float>> lists;  // with their BM25 term weights
  uint32_t k = 0;
};

struct OrTileAnswer {
  std::vector<Hit> hits;
  uint64_t blocks_decoded = 0, postings_decoded = 0;
  uint32_t tiles_scored = 0, tiles_total = 0;
};

class OrTiles {
 public:
  // `candidate_keys`: max_queries × the partition's documents; `fallback`: a selection big enough
  // for the partition's documents, used when a query's keys outgrow one block sort.
  OrTiles(const DeviceIndex& device, size_t max_queries, size_t max_lists, uint64_t* candidate_keys, TopkBuffers& fallback);
  ~OrTiles();
  OrTiles(const OrTiles&) = delete;
  OrTiles& operator=(const OrTiles&) = delete;

  // Runs every query on `stream` (one launch per stage) and synchronises it once.
  std::vector<OrTileAnswer> run(std::span<const OrTileQuery> queries, cudaStream_t stream);

  static constexpr uint32_t kTileDocs = gpu::kTileDocs;  // documents per tile: 16 KiB of shared accumulators

 private:
  struct Buffers;
  struct StageTimes;
  const DeviceIndex& device_;
  size_t max_queries_, max_lists_;
  uint64_t* candidate_keys_;
  TopkBuffers& fallback_;
  std::unique_ptr<Buffers> buffers_;
  std::unique_ptr<StageTimes> times_;
};

}  // namespace warp::gpu
