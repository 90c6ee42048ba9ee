// PARA-style batching (Ao et al. 2011 §3.1) for the GPU query processor: queries wait in a queue
// until the sum of their computational effort reaches a threshold (postings of the shortest list
// for AND, of every list for OR), a batch is full, or the oldest has waited long enough; then the
// whole batch runs together, each stage one kernel launch over every query of the batch:
//   AND    one launch decodes and scores the shortest list of every query (the candidates); per
//          term round, one launch selects blocks for every candidate of every query, one decodes
//          the selected blocks of every query's list and probes their candidates in shared memory
//          (or, for LRC lists, one searches the compressed lists: Ao et al. Algorithm 1);
//   OR     one launch per stage of the OR tiles for every query (or_tiles.hpp), or one launch
//          decoding every list of every query into per-query dense accumulators;
//   top-k  AND: for the whole batch at once (per-query bucket counts, thresholds, one gather, a
//          block sort per query); OR tiles: their batched selection; dense OR: per query.
// Candidate and key memory for a whole batch is allocated once, sized by and_piece_slots and
// or_key_row (dense OR: accumulators for every document of every query of a batch).
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "leaf/gpu/index/device_index.hpp"
#include "leaf/gpu/topk/topk_method.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp::gpu {

struct BatchOptions {
  int device = 0;              // the CUDA device of the executors (their dispatcher threads select it)
  size_t threshold = 1 << 20;  // postings of effort that close a batch (PARA's computational threshold)
  size_t max_queries = 16;     // queries per batch
  uint32_t max_wait_us = 500;  // the longest the first query of a batch waits for company
  size_t executors = 2;        // batches in flight: a BatchExecutor (stream, buffers) and a dispatcher thread each
  TopkMethod topk = TopkMethod::kBucketSelect;
  OrMethod or_method = OrMethod::kTiles;
  // OR tiles: θ never below the query's floor from its terms' best postings and rank floors
  // (or_floor, query_processor.hpp); off only to measure it (gpu_bench --no-or-floor).
  bool or_floor = true;
  bool search_compressed = true;
  // Memory sized by the work, not by documents × queries (25M-document partition at the defaults:
  // 0.5 GB a stream, 0.8 GB a scheduler executor; tests/bench/results/gpu-queries.md): an AND query whose shortest list
  // has more postings than this runs as pieces of that list...
  size_t and_piece_slots = size_t{1} << 22;
  // ...and an OR query keeps this many candidate keys at most (more: it runs again alone).
  size_t or_key_row = size_t{1} << 20;
};

// Runs batches of queries on one stream with its own buffers. Not thread-safe: the batcher calls
// it from one thread.
class BatchExecutor {
 public:
  BatchExecutor(const DeviceIndex& device, const BatchOptions& options);
  ~BatchExecutor();
  BatchExecutor(const BatchExecutor&) = delete;
  BatchExecutor& operator=(const BatchExecutor&) = delete;

  // Answers every query (in order); queries are split into batches that fit the buffers.
  std::vector<QueryResult> run(std::span<const PreparedQuery> queries);
  std::vector<QueryResult> run(std::span<const Query> queries);  // prepared here first
  // run() without waiting, for a host thread that drives several executors: start() prepares the
  // queries (kept by the caller until the results are taken) and launches the first phase (an AND
  // batch, or an OR batch once every AND answer is in: AND+OR queries that found fewer than k join
  // the OR batches); poll() checks the stream without waiting and, when it finished the phase in
  // flight, reads that phase's answers and launches the next; true once every query is answered,
  // then take_results(). A rare fallback (an AND query's top-k alone, an OR query again with a
  // larger row, dense OR) still waits inside poll(). A throw leaves the executor idle.
  void start(std::span<const PreparedQuery> queries);
  bool poll();
  std::vector<QueryResult> take_results();
  // Host seconds the last batch spent in polls that finished a phase and launched the next.
  double between_phases_seconds() const { return between_phases_seconds_; }
  // Drops the batch in progress, if any (its stream drained, its lists released).
  void cancel() {
    if (job_) abandon();
  }
  // The effort a query adds to a batch: its lists' postings (OR) or its shortest list's (AND).
  size_t cost(const PreparedQuery& query) const;
  // AND queries that ran as more than one piece, OR queries that ran again alone with a key row of
  // their size (BatchOptions::and_piece_slots, or_key_row), AND queries (pieces) whose top-k
  // outgrew the batched selection and ran alone: so far.
  struct Splits {
    uint64_t and_split = 0, and_pieces = 0, or_alone = 0, and_alone = 0;
  };
  Splits splits() const { return splits_; }

 private:
  struct Buffers;
  struct Prepared;
  struct Job;        // the queries of start() and where their phases stand
  struct HostTimes;  // WARP_GPU_HOST_TIMES: host time a batch, printed at destruction
  struct AndLaunch {
    size_t queries = 0;
    uint32_t row_stride = 2;
    bool batched_topk = false;
  };
  bool launch_next();  // false: no phase left
  void finish_phase();
  void abandon();  // after a throw: the stream drained, the lists released, no job
  AndLaunch launch_and(std::vector<Prepared>& batch);
  void finish_and(std::vector<Prepared>& batch, const AndLaunch& launched, std::vector<QueryResult>& results);
  bool launch_or(std::vector<Prepared>& batch,
                 std::vector<QueryResult>& results);  // false: answered already (dense OR)
  void finish_or(std::vector<Prepared>& batch, std::vector<QueryResult>& results);
  void run_or_dense(std::vector<Prepared>& batch, std::vector<QueryResult>& results);
  bool tiles() const {
    return options_.or_method != OrMethod::kDenseAccumulators && options_.topk == TopkMethod::kBucketSelect;
  }

  const DeviceIndex& device_;
  BatchOptions options_;
  std::unique_ptr<Buffers> buffers_;
  std::unique_ptr<Job> job_;
  std::unique_ptr<HostTimes> host_times_;
  double between_phases_seconds_ = 0;
  Splits splits_;
};

// The queue in front of BatchOptions::executors BatchExecutors, each fed by its own dispatcher
// thread, so that one batch's host work (staging, results) overlaps another's GPU work. search()
// from any thread blocks until its batch ran.
class Batcher {
 public:
  Batcher(const DeviceIndex& device, const BatchOptions& options);
  ~Batcher();
  QueryResult search(const PreparedQuery& query);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace warp::gpu
