// A PARA batch's executor (Ao et al. §3.1): a batch's queries prepared, their phases launched
// (AND rounds, then the OR tiles), polled, and their answers read back.
#include "leaf/gpu/batch/batch_state.cuh"

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
    const LiveOverlay* live = queries.empty() ? nullptr : queries[0].live;
    for (const PreparedQuery& query : queries)
      if (query.live != live) throw Error("a batch of queries over different overlays");
    if (live) job.live_norms = device_.overlay_norms(*live, buffers_->stream);
    job.norms = live ? job.live_norms.get() : device_.length_norms();
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
      // The OR floor rests on the generation's own statistics: none under an overlay.
      if (options_.or_floor && query.mode != QueryMode::kAnd && live == nullptr)
        p.or_floor = or_floor(scoring, index, query.k);
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

}  // namespace warp::gpu
