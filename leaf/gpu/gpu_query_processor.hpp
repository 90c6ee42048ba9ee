// The GPU query processor of one partition, the twin of CpuQueryProcessor over the same IndexView
// (uploaded once into a DeviceIndex) with the same answers:
// - AND (Ding et al. 2009 §8.1–8.2): the shortest list decoded whole gives the candidates; for each
//   longer list, a merge of the candidates against its per-block last docIDs selects the only blocks
//   to decode; candidates are probed in them and BM25 accumulated term at a time. LRC-coded lists
//   are searched compressed instead (Ao et al. 2011 Algorithm 1), decoding only the probed docIDs.
// - OR: by document tiles with shared-memory accumulators, pruned by docID-range and block maxima
//   against θ, a lower bound on the k-th best score found by a first pass (or_tiles.hpp); or every
//   block of every list decoded into dense per-document accumulators as in Ding et al. §8.3.
// - AND+OR: AND, then OR when AND finds fewer than k.
// - Top-k: bucket select, then a sort of the few keys left, or Ding's multi-level max structure
//   (topk_select.cuh).
// Query memory comes from buffers allocated once at construction, never per query: one set per
// lane. A lane is a CUDA stream with its buffers; `lanes` queries run at once (host threads calling
// search concurrently overlap on the GPU), one lane gives the single-query latency path. With
// batching on, search() queues the query for a PARA batch instead (gpu_batch.hpp).
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "leaf/gpu/index/device_index.hpp"
#include "leaf/gpu/batch/gpu_batch.hpp"
#include "leaf/gpu/topk/topk_method.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp::gpu {

struct GpuProcessorOptions {
  size_t lanes = 4;
  TopkMethod topk = TopkMethod::kBucketSelect;
  OrMethod or_method = OrMethod::kTiles;
  bool or_floor = true;  // BatchOptions::or_floor
  // AND over LRC-coded lists: search the compressed lists element-wise (Ao et al. Algorithm 1)
  // instead of selecting and decoding blocks.
  bool search_compressed = true;
  // Bytes of posting lists kept on the GPU (DeviceIndexOptions::memory_budget); 0: all.
  size_t memory_budget = 0;
  // batch.threshold > 0: queries go through a PARA batch queue instead of the lanes.
  BatchOptions batch{.threshold = 0};
  // search_batch(): this many BatchExecutors (a stream and batch buffers each) beside the lanes,
  // for a caller that forms batches itself (the leaf's scheduler); 0: none.
  size_t batch_executors = 0;
  int device = 0;  // the CUDA device holding this processor's index and buffers
};

class FilterNormsCache;  // index/constrained_norms.cuh

class GpuQueryProcessor final : public QueryProcessor {
 public:
  explicit GpuQueryProcessor(const IndexView& index, GpuProcessorOptions options = {});
  ~GpuQueryProcessor() override;
  std::string_view name() const override { return "gpu"; }
  const IndexView& index() const override { return device_.host(); }
  using QueryProcessor::search;
  using QueryProcessor::search_batch;
  QueryResult search(const PreparedQuery& prepared) const override;
  std::vector<QueryResult> search_batch(std::span<const PreparedQuery> queries) const override;
  // On a free batch executor; with none free, answered at once on the lanes.
  std::unique_ptr<BatchRun> start_batch(std::span<const PreparedQuery> queries) const override;
  DeviceMemoryStats device_memory() const override;
  const DeviceIndex& device_index() const { return device_; }

 private:
  // Makes the processor's device current on the calling thread: every CUDA call of the processor
  // (its constructor, searches, destructor) runs after one, whichever thread calls.
  struct DeviceSelect {
    explicit DeviceSelect(int device);
  };
  struct Lane;
  class ExecutorRun;
  BatchExecutor* take_executor() const;      // waits for a free one
  BatchExecutor* try_take_executor() const;  // null when none is free
  void give_back(BatchExecutor* executor) const;
  // A query's scoring on this partition with the document norms it scores with (the generation's,
  // or an overlay's on the device) and whether an OR floor may start θ.
  struct Scoring {
    const QueryScoring& scoring;
    const float* norms;
    bool or_floor;
  };
  QueryResult search_and(Lane& lane, const Scoring& on, size_t k) const;
  QueryResult search_or(Lane& lane, const Scoring& on, size_t k) const;
  bool or_tiles() const {
    return options_.or_method != OrMethod::kDenseAccumulators && options_.topk == TopkMethod::kBucketSelect;
  }

  DeviceSelect select_;  // first: the members below are made on the device
  DeviceIndex device_;
  GpuProcessorOptions options_;
  std::unique_ptr<Batcher> batcher_;
  // Made with the processor; with a batcher, one made by the first query that needs a lane (under
  // an overlay, or constrained), which the batcher's batches do not take.
  mutable std::vector<std::unique_ptr<Lane>> lanes_;
  mutable std::mutex mutex_;
  mutable std::condition_variable lane_freed_;
  mutable std::vector<Lane*> free_lanes_;
  std::vector<std::unique_ptr<BatchExecutor>> executors_;
  mutable std::condition_variable executor_freed_;
  mutable std::vector<BatchExecutor*> free_executors_;
  // The norms of the last kFilterNormsKept filters asked alone (constrained_norms.cuh), on the device.
  static constexpr size_t kFilterNormsKept = 4;
  std::unique_ptr<FilterNormsCache> filter_norms_;
};

}  // namespace warp::gpu
