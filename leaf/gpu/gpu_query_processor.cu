#include "leaf/gpu/gpu_query_processor.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/query/filter.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_replicas.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/gpu/topk/key_kernels.cuh"
#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/or_tiles/or_tiles.hpp"
#include "leaf/gpu/topk/topk_select.cuh"
#include "leaf/gpu/index/constrained_norms.cuh"
#include "common/util/cuda_check.cuh"

namespace warp::gpu {
namespace {

__global__ void score_candidates_kernel(uint32_t count, const uint32_t* docs, const uint32_t* freqs, const float* norms,
                                        uint32_t doc_begin, float weight, float* scores) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) scores[i] = bm25_units_dev(weight, freqs[i], norms[docs[i] - doc_begin]);
}

// Merge-find of the candidates against the list's per-block last docIDs: the block that would hold
// each live candidate is marked for decoding; a candidate past the list's end dies.
__global__ void select_blocks_kernel(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* block_last,
                                     uint32_t block_count, uint32_t* candidate_block, uint8_t* block_mask) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || scores[i] < 0) return;
  const uint32_t lo = block_for_doc(block_last, block_count, docs[i]);
  if (lo == block_count) {
    scores[i] = -1;
    return;
  }
  candidate_block[i] = lo;
  block_mask[lo] = 1;
}

// Looks each live candidate up in its decoded block; adds the term's score or kills it.
__global__ void probe_kernel(uint32_t count, const uint32_t* docs, float* scores, const uint32_t* candidate_block,
                             uint32_t list_count, uint32_t block_size, const uint32_t* block_docs,
                             const uint32_t* block_freqs, const float* norms, uint32_t doc_begin, float weight) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || scores[i] < 0) return;
  const uint32_t doc = docs[i];
  const int64_t at = find_in_block(block_docs, candidate_block[i], block_size, list_count, doc);
  if (at >= 0) {
    scores[i] += bm25_units_dev(weight, block_freqs[at], norms[doc - doc_begin]);
  } else {
    scores[i] = -1;
  }
}

// Ao et al. Algorithm 1 on an LRC-coded list: each live candidate is searched in the compressed
// list itself (safe range by the list's line, the block by its last docID, the docID by a binary
// search decoding one element per step); its frequency is read alone from the ParaPFor block.
__global__ void lrc_probe_kernel(uint32_t count, const uint32_t* docs, float* scores, DeviceList list,
                                 const float* norms, uint32_t doc_begin, float weight) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || scores[i] < 0) return;
  const uint32_t doc = docs[i];
  const uint32_t freq = lrc_frequency(list, doc);
  if (freq == 0) {
    scores[i] = -1;
    return;
  }
  scores[i] += bm25_units_dev(weight, freq, norms[doc - doc_begin]);
}

constexpr uint32_t kThreads = 256;
constexpr size_t kOrTermsStaged = 1024;  // distinct terms of a GPU OR query staged at start (grows beyond)
uint32_t grid_for(uint32_t n) { return std::max(1u, (n + kThreads - 1) / kThreads); }

}  // namespace

struct GpuQueryProcessor::Lane {
  cudaStream_t stream = nullptr;
  float* accumulators = nullptr;
  uint32_t* candidate_docs = nullptr;
  uint32_t* candidate_freqs = nullptr;
  float* candidate_scores = nullptr;
  uint32_t* candidate_block = nullptr;
  uint32_t* block_docs = nullptr;
  uint32_t* block_freqs = nullptr;
  uint8_t* block_mask = nullptr;
  Counters* counters = nullptr;
  Counters* host_counters = nullptr;  // pinned
  TopkBuffers topk;
  std::unique_ptr<OrTiles> or_tiles;  // OR by tiles; candidate keys in topk.keys
  bool accumulators_dirty = true;     // zeroed by the first OR query
  DeviceIndex::Pins pins;             // lists held by the query in flight

  // `tiles`: OR goes through document tiles, so the dense accumulators are not needed; otherwise
  // the tiles' decode buffers are not (on a 25M-document partition each is hundreds of MB).
  Lane(const DeviceIndex& device, size_t docs, bool tiles, bool staged) {
    try {
      const size_t slots = std::max<size_t>(1, device.max_list_slots());
      WARP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      if (!tiles) WARP_CUDA_CHECK(cudaMalloc(&accumulators, std::max<size_t>(1, docs) * sizeof(float)));
      for (uint32_t** p : {&candidate_docs, &candidate_freqs, &candidate_block, &block_docs, &block_freqs}) {
        WARP_CUDA_CHECK(cudaMalloc(p, slots * sizeof(uint32_t)));
      }
      WARP_CUDA_CHECK(cudaMalloc(&candidate_scores, slots * sizeof(float)));
      WARP_CUDA_CHECK(cudaMalloc(&block_mask, std::max<size_t>(1, device.max_list_blocks())));
      WARP_CUDA_CHECK(cudaMalloc(&counters, sizeof(Counters)));
      WARP_CUDA_CHECK(cudaMallocHost(&host_counters, sizeof(Counters)));
      topk.allocate(std::max(docs, slots));
      if (tiles) or_tiles = std::make_unique<OrTiles>(device, 1, kOrTermsStaged, staged);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Lane() { release(); }
  void release() {
    for (void* p :
         {(void*)accumulators, (void*)candidate_docs, (void*)candidate_freqs, (void*)candidate_scores,
          (void*)candidate_block, (void*)block_docs, (void*)block_freqs, (void*)block_mask, (void*)counters}) {
      cudaFree(p);
    }
    or_tiles.reset();
    accumulators = nullptr, candidate_docs = candidate_freqs = candidate_block = block_docs = block_freqs = nullptr;
    candidate_scores = nullptr, block_mask = nullptr, counters = nullptr;
    cudaFreeHost(host_counters);
    host_counters = nullptr;
    topk.release();
    topk = TopkBuffers{};
    if (stream != nullptr) cudaStreamDestroy(stream);
    stream = nullptr;
  }
  // Counters back to the host, enqueued once the kernels that count are (before the top-k
  // selection, whose synchronisation then covers the copy); read after counters_ready().
  void request_counters() {
    WARP_CUDA_CHECK(cudaMemcpyAsync(host_counters, counters, sizeof(Counters), cudaMemcpyDeviceToHost, stream));
  }
  void counters_ready() { WARP_CUDA_CHECK(cudaStreamSynchronize(stream)); }  // idle after a selection: cheap
};

GpuQueryProcessor::DeviceSelect::DeviceSelect(int device) { WARP_CUDA_CHECK(cudaSetDevice(device)); }

GpuQueryProcessor::GpuQueryProcessor(const IndexView& index, GpuProcessorOptions options)
    : select_(options.device),
      device_(index, DeviceIndexOptions{options.memory_budget}),
      options_(options),
      filter_norms_(std::make_unique<FilterNormsCache>(kFilterNormsKept, options.device)) {
  options_.batch.device = options.device;
  if (options.batch.threshold > 0) {
    options_.batch.topk = options.topk;
    options_.batch.or_method = options.or_method;
    options_.batch.or_floor = options.or_floor;
    options_.batch.search_compressed = options.search_compressed;
    batcher_ = std::make_unique<Batcher>(device_, options_.batch);
    return;
  }
  for (size_t i = 0; i < std::max<size_t>(1, options.lanes); ++i) {
    lanes_.push_back(
        std::make_unique<Lane>(device_, index.doc_count(), or_tiles(), options_.or_method == OrMethod::kTiles));
    free_lanes_.push_back(lanes_.back().get());
  }
  BatchOptions batch = options_.batch;
  batch.topk = options.topk;
  batch.or_method = options.or_method;
  batch.or_floor = options.or_floor;
  batch.search_compressed = options.search_compressed;
  batch.threshold = size_t{1} << 40;  // the caller sizes its batches: buffers for the largest AND candidates
  for (size_t i = 0; i < options.batch_executors; ++i) {
    executors_.push_back(std::make_unique<BatchExecutor>(device_, batch));
    free_executors_.push_back(executors_.back().get());
  }
}

BatchExecutor* GpuQueryProcessor::take_executor() const {
  std::unique_lock<std::mutex> lock(mutex_);
  executor_freed_.wait(lock, [&] { return !free_executors_.empty(); });
  BatchExecutor* executor = free_executors_.back();
  free_executors_.pop_back();
  return executor;
}

BatchExecutor* GpuQueryProcessor::try_take_executor() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_executors_.empty()) return nullptr;
  BatchExecutor* executor = free_executors_.back();
  free_executors_.pop_back();
  return executor;
}

void GpuQueryProcessor::give_back(BatchExecutor* executor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  free_executors_.push_back(executor);
  executor_freed_.notify_one();
}

namespace {
bool any_constrained(std::span<const PreparedQuery> queries) {
  return std::any_of(queries.begin(), queries.end(), [](const PreparedQuery& q) { return q.query.constrained(); });
}
}  // namespace

std::vector<QueryResult> GpuQueryProcessor::search_batch(std::span<const PreparedQuery> queries) const {
  // The lanes, one by one; so are batches with a constrained query (norms of its own).
  if (executors_.empty() || any_constrained(queries)) return QueryProcessor::search_batch(queries);
  DeviceSelect select(options_.device);
  for (const PreparedQuery& prepared : queries) {
    if (prepared.query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
  }
  struct Return {
    const GpuQueryProcessor* self;
    BatchExecutor* executor;
    ~Return() { self->give_back(executor); }
  } give_back{this, take_executor()};
  return give_back.executor->run(queries);
}

// A batch on one of the processor's executors, returned to the pool when the run ends (answered,
// failed, or dropped unfinished: the executor then drains its stream).
class GpuQueryProcessor::ExecutorRun final : public BatchRun {
 public:
  ExecutorRun(const GpuQueryProcessor& processor, BatchExecutor* executor, std::span<const PreparedQuery> queries)
      : processor_(processor), executor_(executor) {
    DeviceSelect select(processor_.options_.device);
    try {
      executor_->start(queries);
    } catch (...) {
      processor_.give_back(executor_);
      throw;
    }
  }
  ~ExecutorRun() override {
    cudaSetDevice(processor_.options_.device);
    executor_->cancel();  // nothing to do once the results are taken
    processor_.give_back(executor_);
  }
  bool poll() override {
    if (done_) return true;
    DeviceSelect select(processor_.options_.device);
    done_ = executor_->poll();
    return done_;
  }
  std::vector<QueryResult> take() override { return executor_->take_results(); }
  double between_phases_seconds() const override { return executor_->between_phases_seconds(); }

 private:
  const GpuQueryProcessor& processor_;
  BatchExecutor* executor_;
  bool done_ = false;
};

std::unique_ptr<BatchRun> GpuQueryProcessor::start_batch(std::span<const PreparedQuery> queries) const {
  if (executors_.empty()) return QueryProcessor::start_batch(queries);  // answered on the lanes
  for (const PreparedQuery& prepared : queries) {
    if (prepared.query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
  }
  // Never waits for an executor: a driver waiting for one that only its own runs in flight would
  // free would wait forever (more runs of one partition than its executors, e.g. partitions spread
  // over devices). With none free the batch is answered on the lanes, one query after another, on
  // a thread of its own: answered on the caller's, it held the driver from polling its other runs
  // for as long.
  BatchExecutor* executor = any_constrained(queries) ? nullptr : try_take_executor();
  if (executor == nullptr) return run_on_thread([this, queries] { return QueryProcessor::search_batch(queries); });
  return std::make_unique<ExecutorRun>(*this, executor, queries);
}

GpuQueryProcessor::~GpuQueryProcessor() {
  cudaSetDevice(
      options_.device);  // every buffer (the batcher's, the executors', the lanes', the index) is freed on its device
  batcher_.reset();
  executors_.clear();
  lanes_.clear();
  filter_norms_.reset();
}

std::unique_ptr<QueryProcessor> make_gpu_processor(const IndexView& index, const GpuSettings& settings) {
  std::string why;
  if (!gpu_available(&why)) throw Error("no usable GPU: " + why);
  GpuProcessorOptions options;
  options.lanes = settings.lanes;
  options.memory_budget = settings.memory_budget;
  options.batch.threshold = settings.batch_threshold;
  options.batch.max_queries = settings.batch_max_queries;
  options.batch.max_wait_us = settings.batch_wait_us;
  const size_t streams = batch_streams_for(settings.batch_streams, settings.scheduled);
  options.batch.executors = streams;
  if (settings.scheduled) options.batch_executors = streams;
  const int count = gpu_device_count();
  for (int device : settings.devices) {
    if (device < 0 || device >= count) {
      throw Error("--gpu-devices names device " + std::to_string(device) + ", but this machine has " +
                  std::to_string(count) + " CUDA device(s)");
    }
  }
  // CUDA's default (auto) spins on this kind of machine; set only what was asked for, so that a
  // process's processors never undo each other's choice.
  if (settings.wait != GpuWait::kSpin) {
    const unsigned flag = settings.wait == GpuWait::kBlock ? cudaDeviceScheduleBlockingSync : cudaDeviceScheduleYield;
    for (int device : settings.devices) {
      WARP_CUDA_CHECK(cudaSetDevice(device));
      WARP_CUDA_CHECK(cudaSetDeviceFlags(flag));
    }
  }
  const std::vector<int> devices = devices_of_partition(index.meta.partition_id, settings.devices, settings.replicas);
  if (devices.size() > 1) return std::make_unique<ReplicatedGpuProcessor>(index, devices, options);
  options.device = devices[0];
  return std::make_unique<GpuQueryProcessor>(index, options);
}

DeviceMemoryStats GpuQueryProcessor::device_memory() const {
  const ListCacheStats s = device_.stats();
  return {s.bytes_resident, s.hits, s.misses, s.evictions};
}

QueryResult GpuQueryProcessor::search(const PreparedQuery& prepared) const {
  const Query& query = prepared.query;
  if (query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
  // Queries under an overlay go on the lanes: a batch of the batcher may mix queries of several
  // overlays (snapshots), an executor's batch never does (one LiveQueryProcessor's). So do queries
  // with constraints: norms of their own.
  if (batcher_ && prepared.live == nullptr && !query.constrained()) return batcher_->search(prepared);
  DeviceSelect select(options_.device);
  QueryScoring local;
  const QueryScoring& scoring = scoring_on(prepared, device_.host(), local);
  Lane* lane;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (lanes_.empty()) {  // a batcher's processor: its first query that needs a lane makes one
      lanes_.push_back(std::make_unique<Lane>(device_, device_.host().doc_count(), or_tiles(),
                                              options_.or_method == OrMethod::kTiles));
      free_lanes_.push_back(lanes_.back().get());
    }
    lane_freed_.wait(lock, [&] { return !free_lanes_.empty(); });
    lane = free_lanes_.back();
    free_lanes_.pop_back();
  }
  struct Return {
    const GpuQueryProcessor* self;
    Lane* lane;
    ~Return() {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->free_lanes_.push_back(lane);
      self->lane_freed_.notify_one();
    }
  } give_back{this, lane};
  // The lane's lists are released after its stream finished with them (every path below syncs).
  struct Unpin {
    const DeviceIndex& device;
    Lane* lane;
    ~Unpin() {
      cudaStreamSynchronize(lane->stream);
      device.release(lane->pins);
    }
  } unpin{device_, lane};
  // Under an overlay: its norms (deleted documents score 0), and no OR floor (it rests on the
  // generation's own statistics).
  const std::shared_ptr<const float> live_norms =
      prepared.live ? device_.overlay_norms(*prepared.live, lane->stream) : nullptr;
  // With constraints (query_constraints.hpp): norms of the query's own, infinite for the documents
  // they keep out, which then score 0 on every path as an overlay's deleted ones do; no OR floor
  // (its best postings may be of documents kept out).
  // A filter alone: its norms kept on the device for the next query with it (FilterNormsCache).
  const float* norms = live_norms ? live_norms.get() : device_.length_norms();
  const IndexView& host = device_.host();
  const size_t norm_count = std::max<size_t>(1, host.length_norms.size());
  std::optional<ConstrainedNorms> constrained;
  std::shared_ptr<const float> filtered;
  if (query.filtered_alone()) {
    const std::string key =
        filter_text(*query.filter) + (prepared.live ? " overlay " + std::to_string(prepared.live->serial) : "");
    filtered = filter_norms_->get(
        key, [&] { return *constraint_docs(query, host); }, norms, norm_count, host.meta.doc_begin, lane->stream);
    norms = filtered.get();
  } else if (const std::optional<ConstraintDocs> docs = constraint_docs(query, host)) {
    constrained.emplace(*docs, norms, norm_count, host.meta.doc_begin, lane->stream);
    norms = constrained->get();
  }
  const Scoring on{scoring, norms, options_.or_floor && prepared.live == nullptr && !constrained && !filtered};
  if (query.mode == QueryMode::kOr) return search_or(*lane, on, query.k);
  QueryResult result = search_and(*lane, on, query.k);
  if (query.mode == QueryMode::kAnd || result.hits.size() >= query.k) return result;
  QueryResult fallback = search_or(*lane, on, query.k);
  fallback.and_matches = result.and_matches;
  fallback.fell_back_to_or = true;
  fallback.stats.blocks_decoded += result.stats.blocks_decoded;
  fallback.stats.blocks_total += result.stats.blocks_total;
  fallback.stats.postings_decoded += result.stats.postings_decoded;
  return fallback;
}

QueryResult GpuQueryProcessor::search_and(Lane& b, const Scoring& on, size_t k) const {
  const QueryScoring& scoring = on.scoring;
  const float* norms = on.norms;
  QueryResult result;
  const IndexView& index = device_.host();
  std::vector<QueryList> lists;
  for (size_t i = 0; i < scoring.terms.size(); ++i) {
    DeviceList list;
    const TermInfo* info = nullptr;
    // A missing term: no document has them all.
    if (!device_.acquire(scoring.terms[i].text, list, &info, b.stream, b.pins)) return result;
    lists.push_back({list, scoring.scoring[i].unit_weight, scoring.scoring[i].bound_scale});
    result.stats.blocks_total += list.block_count;
  }
  if (lists.empty()) return result;
  std::stable_sort(lists.begin(), lists.end(),
                   [](const auto& a, const auto& b) { return a.list.count < b.list.count; });
  const uint32_t doc_begin = index.meta.doc_begin;
  WARP_CUDA_CHECK(cudaMemsetAsync(b.counters, 0, sizeof(Counters), b.stream));
  b.topk.reset(b.stream);

  const DeviceList& shortest = lists[0].list;
  const uint32_t candidates = shortest.count;
  launch_decode(shortest, nullptr, b.candidate_docs, b.candidate_freqs, nullptr, norms, doc_begin, 0, b.counters,
                b.stream);
  score_candidates_kernel<<<grid_for(candidates), kThreads, 0, b.stream>>>(
      candidates, b.candidate_docs, b.candidate_freqs, norms, doc_begin, lists[0].weight, b.candidate_scores);
  WARP_CUDA_CHECK_LAUNCH();
  for (size_t t = 1; t < lists.size(); ++t) {
    const DeviceList& list = lists[t].list;
    if (options_.search_compressed && is_lrc(list.codec)) {
      lrc_probe_kernel<<<grid_for(candidates), kThreads, 0, b.stream>>>(
          candidates, b.candidate_docs, b.candidate_scores, list, norms, doc_begin, lists[t].weight);
      WARP_CUDA_CHECK_LAUNCH();
      continue;
    }
    WARP_CUDA_CHECK(cudaMemsetAsync(b.block_mask, 0, list.block_count, b.stream));
    select_blocks_kernel<<<grid_for(candidates), kThreads, 0, b.stream>>>(
        candidates, b.candidate_docs, b.candidate_scores, list.block_last_docid, list.block_count, b.candidate_block,
        b.block_mask);
    WARP_CUDA_CHECK_LAUNCH();
    launch_decode(list, b.block_mask, b.block_docs, b.block_freqs, nullptr, norms, doc_begin, 0, b.counters, b.stream);
    probe_kernel<<<grid_for(candidates), kThreads, 0, b.stream>>>(
        candidates, b.candidate_docs, b.candidate_scores, b.candidate_block, list.count, list.block_size, b.block_docs,
        b.block_freqs, norms, doc_begin, lists[t].weight);
    WARP_CUDA_CHECK_LAUNCH();
  }
  launch_candidate_keys(candidates, b.candidate_docs, b.candidate_scores, b.topk.keys, b.topk.buckets,
                        &b.counters->matches, b.stream);
  b.request_counters();
  result.hits = b.topk.select(candidates, k, b.stream, options_.topk);
  units_to_scores(result.hits, scoring);
  b.counters_ready();
  result.and_matches = b.host_counters->matches;
  result.stats.blocks_decoded = b.host_counters->blocks_decoded;
  result.stats.postings_decoded = b.host_counters->postings_decoded;
  return result;
}

QueryResult GpuQueryProcessor::search_or(Lane& b, const Scoring& on, size_t k) const {
  const QueryScoring& scoring = on.scoring;
  const float* norms = on.norms;
  QueryResult result;
  const IndexView& index = device_.host();
  const uint32_t doc_begin = index.meta.doc_begin, doc_count = index.doc_count();
  if (doc_count == 0) return result;
  WARP_CUDA_CHECK(cudaMemsetAsync(b.counters, 0, sizeof(Counters), b.stream));
  if (or_tiles()) {
    std::vector<QueryList> lists;
    for (size_t i = 0; i < scoring.terms.size(); ++i) {
      DeviceList list;
      const TermInfo* info = nullptr;
      if (!device_.acquire(scoring.terms[i].text, list, &info, b.stream, b.pins)) continue;
      result.stats.blocks_total += list.block_count;
      lists.push_back({list, scoring.scoring[i].unit_weight, scoring.scoring[i].bound_scale});
    }
    if (lists.empty()) return result;
    const OrTileQuery query{lists, static_cast<uint32_t>(k), on.or_floor ? or_floor(scoring, index, k) : 0, norms};
    OrTileAnswer answer = std::move(b.or_tiles->run({&query, 1}, {b.topk.keys, b.topk.capacity, &b.topk}, b.stream)[0]);
    result.hits = std::move(answer.hits);
    units_to_scores(result.hits, scoring);
    result.stats.blocks_decoded = answer.blocks_decoded;
    result.stats.postings_decoded = answer.postings_decoded;
    return result;
  }
  b.topk.reset(b.stream);
  // Accumulators are left zeroed by the last query's selection; only a query that failed half way
  // leaves them dirty.
  if (b.accumulators_dirty) WARP_CUDA_CHECK(cudaMemsetAsync(b.accumulators, 0, doc_count * sizeof(float), b.stream));
  b.accumulators_dirty = true;
  for (size_t i = 0; i < scoring.terms.size(); ++i) {
    DeviceList list;
    const TermInfo* info = nullptr;
    if (!device_.acquire(scoring.terms[i].text, list, &info, b.stream, b.pins)) continue;
    result.stats.blocks_total += list.block_count;
    launch_decode(list, nullptr, nullptr, nullptr, b.accumulators, norms, doc_begin, scoring.scoring[i].unit_weight,
                  b.counters, b.stream);
  }
  b.request_counters();
  if (options_.topk == TopkMethod::kBucketSelect) {
    result.hits = b.topk.select_accumulators(b.accumulators, doc_count, doc_begin, k, b.stream);
  } else {
    launch_accumulator_keys(doc_count, b.accumulators, doc_begin, b.topk.keys, b.topk.buckets, b.stream);
    result.hits = b.topk.select(doc_count, k, b.stream, options_.topk);
    WARP_CUDA_CHECK(cudaMemsetAsync(b.accumulators, 0, doc_count * sizeof(float), b.stream));
  }
  units_to_scores(result.hits, scoring);
  b.accumulators_dirty = false;
  b.counters_ready();
  result.stats.blocks_decoded = b.host_counters->blocks_decoded;
  result.stats.postings_decoded = b.host_counters->postings_decoded;
  return result;
}

}  // namespace warp::gpu
