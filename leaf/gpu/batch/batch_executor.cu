// A PARA batch's executor (Ao et al. §3.1): a batch's queries prepared, their phases launched
// (AND rounds, then the OR tiles), polled, and their answers read back.
#include "leaf/gpu/batch/gpu_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/util/status.hpp"
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/batch/and_kernels.cuh"
#include "leaf/gpu/intersect/block_select.cuh"
#include "leaf/gpu/topk/key_kernels.cuh"
#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/or_tiles/or_tiles.hpp"
#include "leaf/gpu/decode/task_decode.cuh"
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {
namespace {

constexpr size_t kRoundsStaged = 64;  // term rounds staged at start; a batch with longer queries grows them

template <class T>
void device_alloc(T*& p, size_t count) {
  WARP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
}

// A query's hits from its score units back to BM25 scores (exact: a power of two).
void to_scores(std::vector<Hit>& hits, float score_of_unit) {
  for (Hit& hit : hits) hit.score *= score_of_unit;
}

}  // namespace

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

// WARP_GPU_HOST_TIMES set: each executor prints, when destroyed, its host time a batch in preparing
// the queries (scoring, lists), launching phases and reading their answers (what a GPU driver
// thread spends a batch, polling aside).
struct BatchExecutor::HostTimes {
  bool on = std::getenv("WARP_GPU_HOST_TIMES") != nullptr;
  double prepare = 0, launch = 0, finish = 0;
  uint64_t batches = 0, phases = 0;
  using Clock = std::chrono::steady_clock;
  Clock::time_point mark() const { return on ? Clock::now() : Clock::time_point{}; }
  void add(double& into, Clock::time_point since) const {
    if (on) into += std::chrono::duration<double>(Clock::now() - since).count();
  }
  struct Scope {  // adds the time until it ends to `into`
    Scope(const HostTimes& times, double& into) : times(times), into(into), since(times.mark()) {}
    ~Scope() { times.add(into, since); }
    const HostTimes& times;
    double& into;
    Clock::time_point since;
  };
  ~HostTimes() {
    if (!on || batches == 0) return;
    const double b = static_cast<double>(batches);
    std::fprintf(stderr,
                 "batch executor host time a batch: prepare %.1f µs, launches %.1f µs, answers read %.1f µs; %.2f "
                 "phases a batch, %llu batches\n",
                 prepare / b * 1e6, launch / b * 1e6, finish / b * 1e6, static_cast<double>(phases) / b,
                 static_cast<unsigned long long>(batches));
  }
};

BatchExecutor::BatchExecutor(const DeviceIndex& device, const BatchOptions& options)
    : device_(device),
      options_(options),
      buffers_(std::make_unique<Buffers>()),
      host_times_(std::make_unique<HostTimes>()) {
  options_.max_queries = std::max<size_t>(1, options_.max_queries);
  Buffers& b = *buffers_;
  const size_t queries = options_.max_queries;
  // AND candidates of a batch (every query's shortest list): the threshold's worth plus the last
  // query, at most three pieces; a query whose shortest list is longer than a piece runs as pieces
  // (docID ranges of that list) whose top-k are merged, and a batch whose candidates would not
  // fit closes early. So nothing here grows with the documents or the longest list.
  const size_t list_slots = std::max<size_t>(1, device.max_list_slots());
  const size_t block_size = device.block_size();
  b.piece_blocks = std::max<size_t>(1, options_.and_piece_slots / block_size);
  const size_t piece_slots = std::min(list_slots, b.piece_blocks * block_size);
  b.candidate_capacity = std::min(options_.threshold, 2 * piece_slots) + piece_slots;
  b.mask_capacity = queries * std::max<size_t>(1, device.max_list_blocks());
  b.doc_count = device.host().doc_count();
  b.accumulator_stride = (b.doc_count + 3) / 4 * 4;  // float4-aligned rows
  // OR tiles keep a query's candidates (pass 1's per-tile top-k, pass 2's keys at or above θ) in a
  // row of key_row keys; a query that finds more runs again alone with rows of its size.
  b.key_row = std::max<size_t>(1, std::min<size_t>(b.doc_count, options_.or_key_row));
  WARP_CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  device_alloc(b.candidate_docs, b.candidate_capacity);
  device_alloc(b.candidate_scores, b.candidate_capacity);
  device_alloc(b.candidate_query, b.candidate_capacity);
  device_alloc(b.masks, b.mask_capacity);
  WARP_CUDA_CHECK(
      cudaMemset(b.masks, 0, std::max<size_t>(1, b.mask_capacity)));  // kept zeroed: the probe clears what it reads
  if (!tiles()) device_alloc(b.accumulators, queries * b.accumulator_stride);
  b.reserve_tasks(queries * kRoundsStaged);
  device_alloc(b.counters, queries);
  device_alloc(b.matches, queries + 1);
  device_alloc(b.and_selection, queries);
  device_alloc(b.and_buckets, 2 * queries * kBuckets);
  device_alloc(b.and_refine, 1);
  device_alloc(b.and_staging, queries * kBlockSelectCapacity);
  device_alloc(b.and_results, queries * (2 + kBlockSelectCapacity));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_and_selection, queries * sizeof(AndSelection)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_and_results, queries * (2 + kBlockSelectCapacity) * sizeof(uint64_t)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_counters, queries * sizeof(Counters)));
  WARP_CUDA_CHECK(cudaMallocHost(&b.host_matches, queries * sizeof(unsigned long long)));
  // The selection's keys: AND candidates, an OR tiles row (its fallback), or with dense OR every
  // document.
  b.topk.allocate(std::max(b.candidate_capacity, tiles() ? b.key_row : b.doc_count));
  if (tiles()) {
    device_alloc(b.or_keys, queries * b.key_row);
    b.or_tiles =
        std::make_unique<OrTiles>(device, queries, queries * kRoundsStaged, options_.or_method == OrMethod::kTiles);
  }
}

size_t BatchExecutor::cost(const PreparedQuery& prepared) const {
  QueryScoring local;
  const QueryScoring& scoring = scoring_on(prepared, device_.host(), local);
  size_t shortest = SIZE_MAX, total = 0;
  for (const TermInfo* info : scoring.infos) {  // each distinct term once: an estimate
    const size_t count =
        info == nullptr ? 0 : device_.host().postings[info->offset];  // a list's first word: its length
    shortest = std::min(shortest, count);
    total += count;
  }
  if (scoring.terms.empty()) return 0;
  return prepared.query.mode == QueryMode::kOr ? total : shortest;
}

namespace {

// Adds a piece's answer to its query's: counts summed, hits merged to the query's k best (by score,
// then docID, the order of the selection's keys).
void merge_piece(QueryResult& into, QueryResult&& piece, size_t k) {
  into.and_matches += piece.and_matches;
  into.stats.blocks_decoded += piece.stats.blocks_decoded;
  into.stats.postings_decoded += piece.stats.postings_decoded;
  if (into.hits.empty()) {
    into.hits = std::move(piece.hits);
    return;
  }
  into.hits.insert(into.hits.end(), piece.hits.begin(), piece.hits.end());
  std::sort(into.hits.begin(), into.hits.end(),
            [](const Hit& a, const Hit& b) { return a.score != b.score ? a.score > b.score : a.doc < b.doc; });
  if (into.hits.size() > k) into.hits.resize(k);
}

}  // namespace

// The queries of start() and where their phases stand: AND batches first (known at the start),
// then OR batches (known once every AND answer is in).
struct BatchExecutor::Job {
  std::span<const PreparedQuery> queries;
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

BatchExecutor::~BatchExecutor() {
  if (job_) abandon();  // a batch still running: its stream drained before the buffers go
}

std::vector<QueryResult> BatchExecutor::run(std::span<const PreparedQuery> queries) {
  start(queries);
  while (!poll()) WARP_CUDA_CHECK(cudaStreamSynchronize(buffers_->stream));
  return take_results();
}

std::vector<QueryResult> BatchExecutor::run(std::span<const Query> queries) {
  std::vector<PreparedQuery> prepared;
  prepared.reserve(queries.size());
  for (const Query& query : queries) prepared.push_back(prepare_query(query, device_.host()));
  return run(std::span<const PreparedQuery>(prepared));
}

void BatchExecutor::start(std::span<const PreparedQuery> queries) {
  if (job_) throw Error("a batch executor runs one batch at a time");
  job_ = std::make_unique<Job>();
  Job& job = *job_;
  job.queries = queries;
  const auto prepare_since = host_times_->mark();
  try {
    job.results.resize(queries.size());
    const IndexView& index = device_.host();
    std::vector<Prepared> and_pieces;
    job.prepared.resize(queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
      const Query& query = queries[i].query;
      if (query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
      Prepared& p = job.prepared[i];
      p.index = i;
      p.query = &query;
      QueryScoring local;
      const QueryScoring& scoring = scoring_on(queries[i], index, local);
      p.score_of_unit = scoring.score_of_unit;
      if (options_.or_floor && query.mode != QueryMode::kAnd) p.or_floor = or_floor(scoring, index, query.k);
      for (size_t t = 0; t < scoring.terms.size(); ++t) {
        DeviceList list;
        const TermInfo* info = nullptr;
        if (!device_.acquire(scoring.terms[t].text, list, &info, buffers_->stream, buffers_->pins)) {
          p.missing_term = true;
          continue;
        }
        p.lists.push_back({list, scoring.scoring[t].unit_weight, scoring.scoring[t].bound_scale});
        p.blocks_total += list.block_count;
      }
      std::stable_sort(p.lists.begin(), p.lists.end(),
                       [](const auto& a, const auto& b) { return a.list.count < b.list.count; });
      if (query.mode == QueryMode::kOr) continue;
      job.results[i].stats.blocks_total = p.blocks_total;
      if (query.mode == QueryMode::kAndOr) job.and_or.push_back(i);
      // The shortest list in pieces of at most piece_blocks blocks, each its own candidates.
      const bool and_possible = !p.missing_term && !p.lists.empty();
      const DeviceList* shortest = and_possible ? &p.lists[0].list : nullptr;
      const uint32_t blocks = and_possible ? shortest->block_count : 0;
      uint32_t first = 0;
      if (blocks > buffers_->piece_blocks)
        ++splits_.and_split, splits_.and_pieces += (blocks + buffers_->piece_blocks - 1) / buffers_->piece_blocks;
      do {
        Prepared piece = p;
        piece.first_block = first;
        const uint32_t piece_blocks = static_cast<uint32_t>(std::min<size_t>(blocks - first, buffers_->piece_blocks));
        piece.candidate_slots = piece_blocks * (and_possible ? shortest->block_size : 0);
        piece.candidates =
            and_possible ? std::min(piece.candidate_slots, shortest->count - first * shortest->block_size) : 0;
        and_pieces.push_back(std::move(piece));
        first += piece_blocks;
      } while (first < blocks);
    }
    // AND pieces in batches that fit the candidate arrays; each piece's answer is merged into its
    // query's when its batch is in.
    uint32_t candidate_slots = 0;
    for (Prepared& piece : and_pieces) {
      if (job.and_batches.empty() || job.and_batches.back().size() == options_.max_queries ||
          candidate_slots + piece.candidate_slots > buffers_->candidate_capacity) {
        job.and_batches.emplace_back();
        candidate_slots = 0;
      }
      piece.candidate_offset = candidate_slots;
      candidate_slots += piece.candidate_slots;
      job.and_batches.back().push_back(std::move(piece));
    }
    host_times_->add(host_times_->prepare, prepare_since);
    ++host_times_->batches;
    if (!launch_next()) job.done = true;
  } catch (...) {
    abandon();
    throw;
  }
}

bool BatchExecutor::poll() {
  if (!job_) throw Error("a batch executor polled without a batch");
  Job& job = *job_;
  if (job.done) return true;
  try {
    const auto since = std::chrono::steady_clock::now();
    if (job.in_flight != Job::Phase::kNone) {
      const cudaError_t state = cudaStreamQuery(buffers_->stream);
      if (state == cudaErrorNotReady) return false;
      WARP_CUDA_CHECK(state);
      finish_phase();
    }
    if (launch_next()) {
      job.between_phases_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
      return false;
    }
    job.done = true;
    return true;
  } catch (...) {
    abandon();
    throw;
  }
}

std::vector<QueryResult> BatchExecutor::take_results() {
  if (!job_ || !job_->done) throw Error("a batch executor's results taken before its batch was done");
  std::vector<QueryResult> results = std::move(job_->results);
  between_phases_seconds_ = job_->between_phases_seconds;
  device_.release(buffers_->pins);  // the stream is idle: the last phase finished
  job_.reset();
  return results;
}

void BatchExecutor::abandon() {
  cudaStreamSynchronize(buffers_->stream);
  device_.release(buffers_->pins);
  job_.reset();
}

bool BatchExecutor::launch_next() {
  const HostTimes::Scope timed(*host_times_, host_times_->launch);
  Job& job = *job_;
  job.in_flight = Job::Phase::kNone;
  if (job.next_and < job.and_batches.size()) {
    std::vector<Prepared>& batch = job.and_batches[job.next_and];
    job.and_launched = launch_and(batch);
    job.in_flight = Job::Phase::kAnd;
    return true;
  }
  if (!job.or_planned) {
    // OR queries, and AND+OR queries whose AND found fewer than k, in batches of max_queries.
    job.or_planned = true;
    std::vector<Prepared> or_queries;
    for (size_t i = 0; i < job.queries.size(); ++i) {
      if (job.queries[i].query.mode == QueryMode::kOr) or_queries.push_back(std::move(job.prepared[i]));
    }
    for (size_t i : job.and_or) {
      if (job.results[i].hits.size() < job.queries[i].query.k) or_queries.push_back(std::move(job.prepared[i]));
    }
    for (size_t from = 0; from < or_queries.size(); from += options_.max_queries) {
      job.or_batches.emplace_back(
          std::make_move_iterator(or_queries.begin() + from),
          std::make_move_iterator(or_queries.begin() + std::min(or_queries.size(), from + options_.max_queries)));
    }
  }
  while (job.next_or < job.or_batches.size()) {
    if (launch_or(job.or_batches[job.next_or], job.results)) {
      job.in_flight = Job::Phase::kOr;
      return true;
    }
    ++job.next_or;  // answered already
  }
  return false;
}

void BatchExecutor::finish_phase() {
  const HostTimes::Scope timed(*host_times_, host_times_->finish);
  ++host_times_->phases;
  Job& job = *job_;
  if (job.in_flight == Job::Phase::kAnd) {
    std::vector<Prepared>& batch = job.and_batches[job.next_and++];
    std::vector<QueryResult> answers(batch.size());
    finish_and(batch, job.and_launched, answers);
    for (size_t q = 0; q < batch.size(); ++q)
      merge_piece(job.results[batch[q].index], std::move(answers[q]), batch[q].query->k);
  } else if (job.in_flight == Job::Phase::kOr) {
    finish_or(job.or_batches[job.next_or++], job.results);
  }
  job.in_flight = Job::Phase::kNone;
}

// AND over a batch of pieces, launched: every stage and the copies back on the stream.
BatchExecutor::AndLaunch BatchExecutor::launch_and(std::vector<Prepared>& batch) {
  Buffers& b = *buffers_;
  const uint32_t doc_begin = device_.host().meta.doc_begin;
  const size_t n = batch.size();
  WARP_CUDA_CHECK(cudaMemsetAsync(b.counters, 0, n * sizeof(Counters), b.stream));
  WARP_CUDA_CHECK(cudaMemsetAsync(b.matches, 0, n * sizeof(unsigned long long), b.stream));
  uint32_t total_candidates = 0;
  size_t rounds = 0;
  for (const Prepared& p : batch) rounds = std::max(rounds, p.candidate_slots == 0 ? 0 : p.lists.size());
  b.reserve_tasks(std::max<size_t>(rounds, 1) * options_.max_queries);
  // Every launch's tasks are staged first (round r's in region r) and copied in one go, with every
  // round's table (query → its task or -1): a round costs its launches, no copy or memset (the
  // probe clears the block masks it reads).
  const size_t stride = options_.max_queries;
  struct Round {
    uint32_t tasks = 0, blocks = 0;
    bool decode = false, compressed = false;
  };
  std::vector<Round> staged(std::max<size_t>(rounds, 1));
  uint32_t list_block_size = 128;
  // Round 0: the shortest list of every query (its piece), decoded and scored into the candidates.
  for (size_t q = 0; q < n; ++q) {
    const Prepared& p = batch[q];
    total_candidates = std::max(total_candidates, p.candidate_offset + p.candidate_slots);
    if (p.candidate_slots == 0) continue;
    const DeviceList& list = p.lists[0].list;
    list_block_size = list.block_size;
    b.host_tasks[staged[0].tasks++] = {
        list, staged[0].blocks, p.candidate_offset, 0, static_cast<uint32_t>(q), p.lists[0].weight, p.first_block};
    staged[0].blocks += p.candidate_slots / list.block_size;  // the piece's blocks
  }
  // Term rounds: the r-th list of every query that has one.
  for (size_t r = 1; r < rounds; ++r) {
    Round& round = staged[r];
    uint32_t mask_bytes = 0;
    int32_t* round_of = b.host_round + r * stride;
    for (size_t q = 0; q < n; ++q) {
      const Prepared& p = batch[q];
      round_of[q] = -1;
      if (p.candidate_slots == 0 || r >= p.lists.size()) continue;
      const DeviceList& list = p.lists[r].list;
      const bool searched = options_.search_compressed && is_lrc(list.codec);
      round.decode = round.decode || !searched, round.compressed = round.compressed || searched;
      round_of[q] = static_cast<int32_t>(round.tasks);
      b.host_tasks[r * stride + round.tasks++] = {
          list, round.blocks, p.candidate_offset, mask_bytes, static_cast<uint32_t>(q), p.lists[r].weight,
          0,    p.candidates};
      round.blocks += list.block_count;
      mask_bytes += list.block_count;
    }
  }
  if (staged[0].tasks == 0) rounds = 0;
  if (rounds > 0) {
    const size_t last = (rounds - 1) * stride + staged[rounds - 1].tasks;
    WARP_CUDA_CHECK(cudaMemcpyAsync(b.tasks, b.host_tasks, last * sizeof(Task), cudaMemcpyHostToDevice, b.stream));
    if (rounds > 1) {
      WARP_CUDA_CHECK(cudaMemcpyAsync(b.round_task + stride, b.host_round + stride,
                                      (rounds - 1) * stride * sizeof(int32_t), cudaMemcpyHostToDevice, b.stream));
    }
  }
  auto launch = [&](size_t r, uint8_t* masks, TaskOutput output) {
    if (staged[r].blocks == 0) return;
    launch_decode_tasks(list_block_size, b.tasks + r * stride, staged[r].tasks, staged[r].blocks, masks, output,
                        b.candidate_docs, b.candidate_scores, b.candidate_query, b.accumulators, b.accumulator_stride,
                        device_.length_norms(), doc_begin, b.counters, b.stream);
  };
  if (rounds > 0) launch(0, nullptr, TaskOutput::kCandidates);
  for (size_t r = 1; r < rounds; ++r) {
    const int32_t* device_round = b.round_task + r * stride;
    const Task* device_tasks = b.tasks + r * stride;
    launch_batch_select(total_candidates, b.candidate_docs, b.candidate_scores, b.candidate_query, device_round,
                        device_tasks, b.masks, options_.search_compressed, b.stream);
    if (staged[r].decode) launch(r, b.masks, TaskOutput::kProbe);
    if (staged[r].compressed) {
      launch_batch_probe_compressed(total_candidates, b.candidate_docs, b.candidate_scores, b.candidate_query,
                                    device_round, device_tasks, device_.length_norms(), doc_begin, b.stream);
    }
  }
  // Top-k of each query over its own candidates: batched (four launches for the whole batch, one
  // copy back), or query by query for the max-tree method and for a query whose keys at or above
  // its k-th best bucket outgrow one block sort.
  const bool batched_topk = options_.topk == TopkMethod::kBucketSelect;
  uint32_t row_stride = 2;
  if (batched_topk) {
    for (size_t q = 0; q < n; ++q) {
      const Prepared& p = batch[q];
      b.host_and_selection[q] = AndSelection{p.candidate_offset, p.candidate_slots, static_cast<uint32_t>(p.query->k)};
      row_stride = std::max<uint32_t>(row_stride,
                                      2 + std::min<uint32_t>(static_cast<uint32_t>(p.query->k), kBlockSelectCapacity));
    }
    uint32_t* const sub_buckets = b.and_buckets + options_.max_queries * kBuckets;
    WARP_CUDA_CHECK(cudaMemsetAsync(b.and_buckets, 0, n * kBuckets * sizeof(uint32_t), b.stream));
    WARP_CUDA_CHECK(cudaMemsetAsync(sub_buckets, 0, n * kBuckets * sizeof(uint32_t), b.stream));
    WARP_CUDA_CHECK(cudaMemsetAsync(b.and_refine, 0, sizeof(uint32_t), b.stream));
    WARP_CUDA_CHECK(cudaMemcpyAsync(b.and_selection, b.host_and_selection, n * sizeof(AndSelection),
                                    cudaMemcpyHostToDevice, b.stream));
    launch_and_topk(total_candidates, n, b.candidate_docs, b.candidate_scores, b.candidate_query,
                    {b.topk.keys, b.and_buckets, sub_buckets, b.matches, b.and_selection, b.and_refine, b.and_staging,
                     b.and_results},
                    row_stride, b.stream);
    WARP_CUDA_CHECK(cudaMemcpyAsync(b.host_and_results, b.and_results, n * row_stride * sizeof(uint64_t),
                                    cudaMemcpyDeviceToHost, b.stream));
  }
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.host_counters, b.counters, n * sizeof(Counters), cudaMemcpyDeviceToHost, b.stream));
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(b.host_matches, b.matches, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost, b.stream));
  return {n, row_stride, batched_topk};
}

// An AND batch's answers, once its stream finished: results[q] gets piece q's (hits, matches,
// blocks decoded).
void BatchExecutor::finish_and(std::vector<Prepared>& batch, const AndLaunch& launched,
                               std::vector<QueryResult>& results) {
  Buffers& b = *buffers_;
  const size_t n = launched.queries;
  const uint32_t row_stride = launched.row_stride;
  const bool batched_topk = launched.batched_topk;
  for (size_t q = 0; q < n; ++q) {
    const Prepared& p = batch[q];
    QueryResult& result = results[q];
    result.and_matches = batched_topk ? b.host_matches[q] : 0;
    result.stats.blocks_decoded = b.host_counters[q].blocks_decoded;
    result.stats.postings_decoded = b.host_counters[q].postings_decoded;
    if (p.candidate_slots == 0) continue;
    const uint64_t* row = b.host_and_results + q * row_stride;
    if (batched_topk && row[1] == 0) {
      result.hits = keys_to_hits(row + 2, std::min<size_t>(p.query->k, row[0]));
    } else {
      splits_.and_alone += batched_topk;
      // One query's keys again (into the selection's own key array) and its selection.
      unsigned long long* matches = batched_topk ? b.matches + options_.max_queries : b.matches + q;
      b.topk.reset(b.stream);
      launch_candidate_keys(p.candidate_slots, b.candidate_docs + p.candidate_offset,
                            b.candidate_scores + p.candidate_offset, b.topk.keys, b.topk.buckets, matches, b.stream);
      result.hits = b.topk.select(p.candidate_slots, p.query->k, b.stream, options_.topk);
      if (!batched_topk) {
        WARP_CUDA_CHECK(cudaMemcpy(&result.and_matches, matches, sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      }
    }
    to_scores(result.hits, p.score_of_unit);
  }
}

// An OR batch launched (tiles: every stage and the copy back); false when it was answered here
// already (no documents; dense OR, which waits for its selections).
bool BatchExecutor::launch_or(std::vector<Prepared>& batch, std::vector<QueryResult>& results) {
  Buffers& b = *buffers_;
  const uint32_t doc_count = device_.host().doc_count();
  const size_t n = batch.size();
  if (doc_count == 0) return false;
  for (size_t q = 0; q < n; ++q) {
    QueryResult& result = results[batch[q].index];
    if (batch[q].query->mode == QueryMode::kAndOr) {
      result.fell_back_to_or = true;  // AND found fewer than k: its and_matches and stats stay
      result.stats.blocks_total += batch[q].blocks_total;
    } else {
      result.stats.blocks_total = batch[q].blocks_total;
    }
  }
  if (tiles()) {
    // One launch per stage for the whole batch (or_tiles.hpp).
    Job& job = *job_;
    job.or_queries.resize(n);
    for (size_t q = 0; q < n; ++q)
      job.or_queries[q] = {batch[q].lists, static_cast<uint32_t>(batch[q].query->k), batch[q].or_floor};
    job.or_launched = b.or_tiles->launch(job.or_queries, {b.or_keys, b.key_row, &b.topk}, b.stream);
    return true;
  }
  WARP_CUDA_CHECK(cudaMemsetAsync(b.counters, 0, n * sizeof(Counters), b.stream));  // the tiles count in their scratch
  run_or_dense(batch, results);
  WARP_CUDA_CHECK(cudaMemcpyAsync(b.host_counters, b.counters, n * sizeof(Counters), cudaMemcpyDeviceToHost, b.stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(b.stream));
  for (size_t q = 0; q < n; ++q) {
    QueryResult& result = results[batch[q].index];
    result.stats.blocks_decoded += b.host_counters[q].blocks_decoded;
    result.stats.postings_decoded += b.host_counters[q].postings_decoded;
  }
  return false;
}

// An OR tiles batch's answers, once its stream finished.
void BatchExecutor::finish_or(std::vector<Prepared>& batch, std::vector<QueryResult>& results) {
  Buffers& b = *buffers_;
  Job& job = *job_;
  std::vector<OrTileAnswer> answers =
      b.or_tiles->collect(job.or_queries, {b.or_keys, b.key_row, &b.topk}, job.or_launched, b.stream);
  for (size_t q = 0; q < batch.size(); ++q) {
    if (answers[q].keys > b.key_row) {
      answers[q] = b.or_tiles->run_alone(job.or_queries[q], answers[q].keys, b.stream);
      ++splits_.or_alone;
    }
    QueryResult& result = results[batch[q].index];
    result.hits = std::move(answers[q].hits);
    to_scores(result.hits, batch[q].score_of_unit);
    result.stats.blocks_decoded += answers[q].blocks_decoded;
    result.stats.postings_decoded += answers[q].postings_decoded;
  }
}

void BatchExecutor::run_or_dense(std::vector<Prepared>& batch, std::vector<QueryResult>& results) {
  Buffers& b = *buffers_;
  const IndexView& index = device_.host();
  const uint32_t doc_begin = index.meta.doc_begin, doc_count = index.doc_count();
  const size_t n = batch.size();
  if (b.accumulators_dirty) {
    WARP_CUDA_CHECK(
        cudaMemsetAsync(b.accumulators, 0, options_.max_queries * b.accumulator_stride * sizeof(float), b.stream));
  }
  b.accumulators_dirty = true;
  uint32_t tasks = 0, blocks = 0, list_block_size = 128;
  size_t list_total = 0;
  for (const Prepared& p : batch) list_total += p.lists.size();
  b.reserve_tasks(list_total);
  for (size_t q = 0; q < n; ++q) {
    for (const auto& [list, weight, bound_scale] : batch[q].lists) {
      list_block_size = list.block_size;
      b.host_tasks[tasks++] = {list, blocks, 0, 0, static_cast<uint32_t>(q), weight};
      blocks += list.block_count;
    }
  }
  if (tasks > 0) {
    WARP_CUDA_CHECK(cudaMemcpyAsync(b.tasks, b.host_tasks, tasks * sizeof(Task), cudaMemcpyHostToDevice, b.stream));
    launch_decode_tasks(list_block_size, b.tasks, tasks, blocks, nullptr, TaskOutput::kAccumulate, nullptr, nullptr,
                        nullptr, b.accumulators, b.accumulator_stride, device_.length_norms(), doc_begin, b.counters,
                        b.stream);
  }
  for (size_t q = 0; q < n; ++q) {
    float* accumulators = b.accumulators + q * b.accumulator_stride;
    const size_t k = batch[q].query->k;
    std::vector<Hit> hits;
    if (options_.topk == TopkMethod::kBucketSelect) {
      b.topk.reset(b.stream);
      hits = b.topk.select_accumulators(accumulators, doc_count, doc_begin, k, b.stream);
    } else {
      b.topk.reset(b.stream);
      launch_accumulator_keys(doc_count, accumulators, doc_begin, b.topk.keys, b.topk.buckets, b.stream);
      hits = b.topk.select(doc_count, k, b.stream, options_.topk);
      WARP_CUDA_CHECK(cudaMemsetAsync(accumulators, 0, doc_count * sizeof(float), b.stream));
    }
    to_scores(hits, batch[q].score_of_unit);
    results[batch[q].index].hits = std::move(hits);
  }
  b.accumulators_dirty = false;
}

}  // namespace warp::gpu
