// What batch_executor.cu (a batch's preparation, phases and polling) and batch_phases.cu (the AND
// and OR phases' launches and answers) share: a query's prepared lists, the executor's device
// buffers, the batch in progress. Private to leaf/gpu/batch.
#pragma once
#include <algorithm>
#include <vector>

#include "common/util/cuda_check.cuh"
#include "leaf/gpu/batch/and_kernels.cuh"
#include "leaf/gpu/batch/gpu_batch.hpp"
#include "leaf/gpu/or_tiles/or_tiles.hpp"

namespace warp::gpu {

inline constexpr size_t kRoundsStaged = 64;  // term rounds staged at start; a batch with longer queries grows them

template <class T>
void device_alloc(T*& p, size_t count) {
  WARP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
}

// A query's hits from its score units back to BM25 scores (exact: a power of two).
inline void to_scores(std::vector<Hit>& hits, float score_of_unit) {
  for (Hit& hit : hits) hit.score *= score_of_unit;
}

struct BatchExecutor::Prepared {
  size_t index = 0;  // in the caller's span
  const Query* query = nullptr;
  std::vector<QueryList> lists;  // shortest first for AND
  float score_of_unit = 1;       // the query's score units (bm25.hpp)
  Score or_floor = 0;            // OR: where θ starts (OrTileQuery::floor)
  bool missing_term = false;
  size_t blocks_total = 0;
  uint32_t candidate_offset = 0, candidate_slots = 0;
  uint32_t first_block = 0;  // AND: the piece of the shortest list from this block on...
  uint32_t candidates = 0;   // ...of this many postings, candidate_slots with the last block's padding
};

struct BatchExecutor::Buffers {
  cudaStream_t stream = nullptr;
  size_t candidate_capacity = 0, piece_blocks = 0, mask_capacity = 0, doc_count = 0, accumulator_stride = 0;
  size_t key_row = 0;  // OR tiles: candidate keys per query
  uint32_t* candidate_docs = nullptr;
  float* candidate_scores = nullptr;
  uint32_t* candidate_query = nullptr;
  uint8_t* masks = nullptr;
  float* accumulators = nullptr;  // dense OR: max_queries × accumulator_stride, kept zeroed
  uint64_t* or_keys = nullptr;    // OR tiles: max_queries × key_row candidate keys
  std::unique_ptr<OrTiles> or_tiles;
  size_t task_capacity = 0;  // of tasks, round_task and their pinned staging
  Task* tasks = nullptr;
  int32_t* round_task = nullptr;
  Counters* counters = nullptr;
  unsigned long long* matches = nullptr;  // max_queries, then one discarded by the per-query fallback
  AndSelection* and_selection = nullptr;  // the batched AND top-k: per query
  uint32_t* and_buckets = nullptr;        // max_queries × kBuckets, then as many for the refinement
  uint32_t* and_refine = nullptr;         // any query's k-th bucket crowded
  uint64_t* and_staging = nullptr;        // max_queries × kBlockSelectCapacity
  uint64_t* and_results = nullptr;        // max_queries rows of [selected, overflow, up to kBlockSelectCapacity keys]
  AndSelection* host_and_selection = nullptr;
  uint64_t* host_and_results = nullptr;
  Task* host_tasks = nullptr;  // pinned staging
  int32_t* host_round = nullptr;
  Counters* host_counters = nullptr;
  unsigned long long* host_matches = nullptr;
  TopkBuffers topk;
  bool accumulators_dirty = true;
  DeviceIndex::Pins pins;  // lists of the queries being batched, released after each run

  ~Buffers() {
    for (void* p :
         {(void*)candidate_docs, (void*)candidate_scores, (void*)candidate_query, (void*)masks, (void*)accumulators,
          (void*)tasks, (void*)round_task, (void*)counters, (void*)matches, (void*)or_keys, (void*)and_selection,
          (void*)and_buckets, (void*)and_refine, (void*)and_staging, (void*)and_results}) {
      cudaFree(p);
    }
    for (void* p : {(void*)host_tasks, (void*)host_round, (void*)host_counters, (void*)host_matches,
                    (void*)host_and_selection, (void*)host_and_results}) {
      cudaFreeHost(p);
    }
    or_tiles.reset();
    topk.release();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // Task staging for `count` tasks (AND: rounds × max_queries; dense OR: every list of a batch).
  // Grows only for queries of more terms than kRoundsStaged, after the stream is idle.
  void reserve_tasks(size_t count) {
    if (count <= task_capacity) return;
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (void* p : {(void*)tasks, (void*)round_task}) cudaFree(p);
    for (void* p : {(void*)host_tasks, (void*)host_round}) cudaFreeHost(p);
    tasks = nullptr, round_task = nullptr, host_tasks = nullptr, host_round = nullptr;
    task_capacity = 0;
    WARP_CUDA_CHECK(cudaMalloc(&tasks, count * sizeof(Task)));
    WARP_CUDA_CHECK(cudaMalloc(&round_task, count * sizeof(int32_t)));
    WARP_CUDA_CHECK(cudaMallocHost(&host_tasks, count * sizeof(Task)));
    WARP_CUDA_CHECK(cudaMallocHost(&host_round, count * sizeof(int32_t)));
    task_capacity = count;
  }
};

// The queries of start() and where their phases stand: AND batches first (known at the start),
// then OR batches (known once every AND answer is in).
struct BatchExecutor::Job {
  std::span<const PreparedQuery> queries;
  // The batch's overlay norms (its queries' LiveOverlay, all the same one), held until the batch
  // ends; null: the index's own (norms).
  std::shared_ptr<const float> live_norms;
  const float* norms = nullptr;
  std::vector<QueryResult> results;
  std::vector<Prepared> prepared;
  std::vector<size_t> and_or;  // AND+OR queries, by index: to OR when AND finds fewer than k
  std::vector<std::vector<Prepared>> and_batches, or_batches;
  size_t next_and = 0, next_or = 0;
  bool or_planned = false;
  double between_phases_seconds = 0;
  enum class Phase { kNone, kAnd, kOr } in_flight = Phase::kNone;
  AndLaunch and_launched;
  std::vector<OrTileQuery> or_queries;  // of the OR batch in flight
  OrTiles::Launched or_launched;
  bool done = false;
};

}  // namespace warp::gpu
