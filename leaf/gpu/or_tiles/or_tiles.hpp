// OR top-k by document tiles with block-max pruning, for one query (a lane) or a PARA batch.
//
// Dense per-document accumulators (Ding et al. §8.3) score every posting; the CPU's BlockMax-WAND
// decodes a fifth of the blocks. Here a tile of 4,096 consecutive documents (32 slices of 128) is
// the unit of work, and bounds per slice decide what is scored:
//   bounds  a list's bound in a slice is its docID-range maximum (DeviceIndex keeps one byte per
//           slice for the long lists: Dimopoulos et al., WSDM 2013), or for a short ("sparse")
//           list the exact maximum, found by decoding and scoring it once per run (its scored
//           postings are kept, so tiles read them instead of decoding its blocks), or else the
//           block-max of the blocks overlapping the slice. A slice's bound is the sum over the
//           query's lists, a tile's the largest of its slices' (one warp per tile, a lane per slice).
//   plan    one thread block per query: the first pass takes the tiles of highest bound (a
//           histogram of the bounds by the selection's key buckets).
//   pass 1  one thread block per first-pass tile: scores the tile in shared memory and keeps its
//           own top-k as candidates.
//   theta   one thread block per query: θ, a lower bound on the k-th best score (two-level
//           histogram of the candidates' keys: 16 mantissa bits), and the round's tiles (below)
//           whose bound reaches θ go to the work list.
//   pass 2  persistent thread blocks over the work list of every query: only the blocks that
//           overlap a live slice (bound >= θ) are decoded, a block per warp; a tile keeps the
//           documents scoring at least θ. In a tile, the lists whose bounds sum below θ (MaxScore's
//           non-essential lists) come last, one at a time, and only where a document's partial
//           score plus the bounds still to come reaches θ. Rounds by rank of bound: the first
//           pass's tiles × 4, × 16, … then the rest, θ recomputed from every candidate before each
//           (0.39, 0.69, 0.90, 0.98 of the k-th best on the GOV2-like preset at k = 1000).
//   select  one thread block per query: the bucket of the k-th best, a block sort of the keys at
//           or above it; the k best keys of every query come back in one copy.
// Every document that can be in the top-k (score >= the k-th best >= θ) lies in a live slice of
// a scored tile, its score is complete inside its tile, and it is kept: the answer is exact. Scores
// are sums of integer units (bm25.hpp), exact in any order; stored bounds are scaled into those
// units per list, and bound comparisons allow 1e-4 relative slack for float rounding. Keys beyond one block sort (k
// near 10,000, or ties) fall back to TopkBuffers::select_candidates.
#pragma once
#include <cuda_runtime.h>

#include <span>
#include <utility>
#include <vector>

#include "leaf/gpu/index/device_index.hpp"
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {

struct OrTileQuery {
  std::span<const QueryList> lists;  // with their BM25 weights in the query's score units
  uint32_t k = 0;
  // A score in those units that the k-th best is known to reach (or_floor), or 0: θ starts there.
  Score floor = 0;
  // The documents' length norms on the device (an overlay's, DeviceIndex::overlay_norms); null: the
  // index's own. Every query of one run has the same.
  const float* norms = nullptr;
};

struct OrTileAnswer {
  std::vector<Hit> hits;
  uint64_t blocks_decoded = 0, postings_decoded = 0;
  uint64_t keys = 0;  // candidate keys the query kept; more than the row holds: no hits, run it again
};

// Where a run keeps each query's candidate keys: rows of `row` keys (query i's from keys + i * row;
// no query keeps more than the partition's documents), and the selection that takes over when a
// query's keys at or above its k-th best's bucket outgrow a block sort (capacity >= row).
struct OrTileRows {
  uint64_t* keys = nullptr;
  size_t row = 0;
  TopkBuffers* fallback = nullptr;
  bool lasting = true;  // the same rows every run (false: allocated for one run, never in a graph)
};

class OrTiles {
 public:
  // staged: pass 2 scores a tile's non-essential lists last and only where they can matter
  // (MaxScore stages, or_tiles_score.cuh); false: every list over every live slice.
  OrTiles(const DeviceIndex& device, size_t max_queries, size_t max_lists, bool staged = true);
  ~OrTiles();
  OrTiles(const OrTiles&) = delete;
  OrTiles& operator=(const OrTiles&) = delete;

  // Runs every query on `stream` (one launch per stage) and synchronises it once. A run with more
  // lists than the staging holds (queries of hundreds of terms) grows it first. A query whose
  // candidates outgrow its row gets no hits and its `keys` > rows.row: it must run again with a
  // row of that many keys (run_alone).
  std::vector<OrTileAnswer> run(std::span<const OrTileQuery> queries, const OrTileRows& rows, cudaStream_t stream);
  // run() in two halves, for a caller that does other work while the stream runs: launch() enqueues
  // every stage and the copy back; collect(), once the stream has finished them, reads the answers
  // (with the same queries and rows). One launch in flight per OrTiles.
  struct Launched {
    size_t queries = 0;
    bool any = false;  // false: nothing was launched (no query with lists and k)
    uint32_t result_stride = 0;
    size_t key_stride = 0;
  };
  Launched launch(std::span<const OrTileQuery> queries, const OrTileRows& rows, cudaStream_t stream);
  std::vector<OrTileAnswer> collect(std::span<const OrTileQuery> queries, const OrTileRows& rows,
                                    const Launched& launched, cudaStream_t stream);
  // One query with a key row and a selection of `keys` keys, allocated for this call and freed.
  OrTileAnswer run_alone(const OrTileQuery& query, size_t keys, cudaStream_t stream);

  static constexpr uint32_t kTileDocs = gpu::kTileDocs;  // documents per tile: 16 KiB of shared accumulators

 private:
  struct Buffers;
  struct StageTimes;
  void grow_staging(size_t lists);

  const DeviceIndex& device_;
  size_t max_queries_, max_lists_;
  bool staged_;
  std::unique_ptr<Buffers> buffers_;
  std::unique_ptr<StageTimes> times_;
};

}  // namespace warp::gpu
