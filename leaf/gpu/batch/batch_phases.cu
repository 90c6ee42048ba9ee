// A PARA batch's phases (Ao et al. §3.1): AND over the batch's pieces (candidates from each
// shortest list, probed in the others, selected), the OR tiles, and their answers read back.
#include <algorithm>
#include <chrono>

#include "common/util/status.hpp"
#include "leaf/gpu/batch/batch_state.cuh"
#include "leaf/gpu/decode/list_decode.cuh"
#include "leaf/gpu/decode/task_decode.cuh"
#include "leaf/gpu/intersect/block_select.cuh"
#include "leaf/gpu/topk/key_kernels.cuh"
#include "leaf/gpu/topk/topk_select.cuh"

namespace warp::gpu {

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
                        job_->norms, doc_begin, b.counters, b.stream);
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
                                    device_round, device_tasks, job_->norms, doc_begin, b.stream);
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
      job.or_queries[q] = {batch[q].lists, static_cast<uint32_t>(batch[q].query->k), batch[q].or_floor, job.norms};
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
                        nullptr, b.accumulators, b.accumulator_stride, job_->norms, doc_begin, b.counters, b.stream);
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
