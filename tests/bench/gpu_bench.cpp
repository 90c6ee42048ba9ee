// gpu_bench (GPU machine): the device-to-device copy ceiling; decode speed of every codec's GPU
// decoder for lists of 2^16..2^26 postings next to the ceiling and the CPU decoder; and query
// throughput and latency of the GPU processor (one query at a time) against the CPU processor on
// one core and on all cores, on a synthetic collection. Every GPU answer is checked against the CPU.
// usage: gpu_bench [--max-log2 26] [--docs 500000] [--queries 500]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "common/index/index_builder.hpp"
#include "common/util/flags.hpp"
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/batch/gpu_batch.hpp"
#include "tests/support/gpu_decode.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/gpu/gpu_replicas.hpp"
#include "leaf/gpu/gpu_query_processor.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/gpu/intersect/intersect.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/gov2_preset.hpp"
#include "tests/bench/synthetic_collection.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

// One list of n postings: docIDs with geometric gaps (mean 4, as in a mid-frequency list) and
// small frequencies.
IndexView one_list_view(const Codec& codec, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::geometric_distribution<uint32_t> gap(0.25), freq(0.6);
  std::vector<Posting> postings(n);
  DocId doc = kEndDoc;
  for (auto& p : postings) p = {doc = doc + gap(rng) + 1, freq(rng) + 1};
  std::vector<Score> scores(n, 1.0f);
  IndexView view;
  view.meta.codec = std::string(codec.name());
  view.meta.doc_end = postings.back().doc + 1;
  std::vector<uint32_t> words = encode_posting_list(postings, scores, codec);
  view.lexicon["t"] = {static_cast<uint32_t>(n), n, 0, static_cast<uint32_t>(words.size())};
  view.postings = std::move(words);
  view.postings.resize(view.postings.size() + kReadPaddingWords, 0);
  return view;
}

// The CPU twin of the GPU decode: every block of docIDs (gaps, then the prefix sum from the previous
// block's last docID) and frequencies into preallocated arrays, one core.
void cpu_decode(const PostingListView& list, uint32_t* docs, uint32_t* freqs) {
  auto doc_blocks = list.codec->decoder(list.docs);
  auto freq_blocks = list.freq_codec->decoder(list.freqs);
  const uint32_t block_size = list.codec->block_size();
  for (uint32_t block = 0; block < list.block_count; ++block) {
    uint32_t* out = docs + size_t{block} * block_size;
    doc_blocks->decode_block(block, out);
    freq_blocks->decode_block(block, freqs + size_t{block} * block_size);
    const uint32_t n = std::min(block_size, list.count - block * block_size);
    DocId previous = block == 0 ? kEndDoc : list.block_last_docid[block - 1];
    for (uint32_t i = 0; i < n; ++i) out[i] = previous = previous + out[i] + 1;
  }
}

// The decode table's choices: list lengths 2^min_log2..2^max_log2 (even steps from min_log2),
// the codecs (empty: all), timed launches per median.
struct DecodeTableOptions {
  int min_log2 = 16, max_log2 = 26;
  std::vector<std::string> codecs;
  int repetitions = 30;
  bool cpu = true;  // the CPU column (one core decoding the same list)
};

void decode_table(const DecodeTableOptions& options, double copy_gbps) {
  std::printf("\n### GPU decode: docIDs (with the per-block prefix sum) and frequencies of one list\n\n");
  std::printf(
      "| codec | postings | bits/posting | GPU µs | GPU G postings/s | GPU GB/s (read+write) | %% of copy | CPU 1-core "
      "M postings/s | GPU/CPU |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Codec* codec : all_codecs()) {
    if (!options.codecs.empty() &&
        std::find(options.codecs.begin(), options.codecs.end(), std::string(codec->name())) == options.codecs.end()) {
      continue;
    }
    for (int log2 = options.min_log2; log2 <= options.max_log2; log2 += 2) {
      const size_t n = size_t{1} << log2;
      const IndexView view = one_list_view(*codec, n, 42 + log2);
      const PostingListView list = view.list("t", view.lexicon.at("t"));
      gpu::DeviceIndex device(view);
      const auto cpu_postings = decode_posting_list(list);
      double cpu_s = 0;
      if (options.cpu) {
        std::vector<uint32_t> docs(n + 256), freqs(n + 256);
        cpu_s = bench::median_seconds_per_call([&] { cpu_decode(list, docs.data(), freqs.data()); }, 3, 0.05);
      }
      const auto gpu_postings = gpu::decode_list_on_gpu(device, "t");
      for (size_t i = 0; i < n; i += 997) {
        if (gpu_postings[i].doc != cpu_postings[i].doc || gpu_postings[i].freq != cpu_postings[i].freq) {
          std::printf("GPU DECODE MISMATCH %s n=%zu at %zu\n", codec->name().data(), n, i);
          break;
        }
      }
      const double gpu_ms = gpu::time_list_decode_ms(device, "t", options.repetitions);
      const double compressed_bytes = view.lexicon.at("t").words * 4.0;
      const double gbps = (compressed_bytes + 8.0 * n) / (gpu_ms * 1e-3) / 1e9;
      if (options.cpu) {
        std::printf("| %s | 2^%d | %.2f | %.1f | %.2f | %.0f | %.0f%% | %.0f | %.0f× |\n", codec->name().data(), log2,
                    compressed_bytes * 8 / n, gpu_ms * 1e3, n / (gpu_ms * 1e-3) / 1e9, gbps, 100 * gbps / copy_gbps,
                    n / cpu_s / 1e6, cpu_s / (gpu_ms * 1e-3));
      } else {
        std::printf("| %s | 2^%d | %.2f | %.1f | %.2f | %.0f | %.0f%% | – | – |\n", codec->name().data(), log2,
                    compressed_bytes * 8 / n, gpu_ms * 1e3, n / (gpu_ms * 1e-3) / 1e9, gbps, 100 * gbps / copy_gbps);
      }
      std::fflush(stdout);
    }
  }
}

std::vector<uint32_t> uniform_sorted(size_t n, uint64_t range, std::mt19937_64& rng) {
  std::vector<uint32_t> docs;
  while (docs.size() < n) {
    for (size_t i = docs.size(); i < n; ++i) docs.push_back(static_cast<uint32_t>(rng() % range));
    std::sort(docs.begin(), docs.end());
    docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  }
  return docs;
}

// Ding et al. Fig. 6: two equal lists of 5k..16M, and a 200k list against 200k..12.8M; random
// docIDs below 2^27 (GOV2-sized). ns per element of both lists; CPU: std::set_intersection.
void intersection_table() {
  std::printf(
      "\n### Intersection: ns per element (shorter + longer), median of 20; CPU = std::set_intersection, one core\n\n");
  std::printf(
      "para-hs-lrc searches the longer list compressed with HS_LRC (Ao et al. Algorithm 1); its bits per docID in the "
      "last column\n\n");
  std::printf(
      "| shorter | longer | merge-find | para-binary | para-lr | para-hs | para-hs-lrc | CPU | best GPU / CPU | HS_LRC "
      "bits/docID |\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937_64 rng(17);
  std::vector<std::pair<size_t, size_t>> cases;
  for (size_t n : {5000, 50000, 500000, 5000000, 16000000}) cases.push_back({n, n});
  for (size_t n : {200000, 800000, 3200000, 12800000}) cases.push_back({200000, n});
  gpu::GpuIntersector intersector(16000000);
  for (const auto& [na, nb] : cases) {
    const auto a = uniform_sorted(na, 1u << 27, rng), b = uniform_sorted(nb, 1u << 27, rng);
    gpu::DeviceSortedList da(a), db(b);
    std::vector<uint32_t> expected;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(expected));
    std::printf("| %zu | %zu |", na, nb);
    double best = 1e30;
    for (auto method : {gpu::IntersectMethod::kMergePath, gpu::IntersectMethod::kBinarySearch,
                        gpu::IntersectMethod::kLinearRegression, gpu::IntersectMethod::kHashSegmentation,
                        gpu::IntersectMethod::kHsLrcCompressed}) {
      const bool ok = intersector.intersect(da, db, method) == expected;
      const double ms = intersector.time_ms(da, db, method, 20);
      best = std::min(best, ms);
      std::printf(" %.3f%s |", ms * 1e6 / double(na + nb), ok ? "" : " WRONG");
    }
    std::vector<uint32_t> out;
    out.reserve(na);
    const double cpu_s = bench::median_seconds_per_call(
        [&] {
          out.clear();
          std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
        },
        3, 0.05);
    std::printf(" %.3f | %.0f× | %.2f |\n", cpu_s * 1e9 / double(na + nb), cpu_s * 1e3 / best, db.lrc_bytes * 8.0 / nb);
    std::fflush(stdout);
  }
}

struct Timing {
  double qps = 0, p50 = 0, p99 = 0;
};

template <class Search>
Timing run(const std::vector<Query>& queries, size_t threads, Search&& search) {
  std::vector<double> latency(queries.size());
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < queries.size(); i = next++) {
        const auto begin = Clock::now();
        search(queries[i]);
        latency[i] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      }
    });
  }
  for (auto& w : workers) w.join();
  return {queries.size() / std::chrono::duration<double>(Clock::now() - start).count(), bench::percentile(latency, 50),
          bench::percentile(latency, 99)};
}

// One ranking: the same documents with bit-identical scores.
bool same_scores(const QueryResult& a, const QueryResult& b) {
  if (a.hits.size() != b.hits.size()) return false;
  for (size_t j = 0; j < a.hits.size(); ++j) {
    if (a.hits[j].doc != b.hits[j].doc || a.hits[j].score != b.hits[j].score) return false;
  }
  return true;
}

// One row per mode and k: the GPU single-query path (1 lane, one query at a time), 8 lanes, and
// PARA batches (many clients), against the CPU processor on every core and on one. Every 10th
// query of each GPU path is checked against the CPU.
std::vector<QueryMode> table_modes = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

size_t batch_max_queries = 16;                          // --batch-max
size_t batch_streams = 2;                               // --batch-streams
size_t batch_clients = 0;                               // --batch-clients (0: enough to fill every stream twice over)
size_t timed_passes = 3;                                // --passes
std::vector<size_t> table_ks = {10, 1000};              // --ks
gpu::OrMethod table_or_method = gpu::OrMethod::kTiles;  // --or-unstaged: kTilesUnstaged
bool table_or_floor = true;                             // --no-or-floor: false

void query_table(const IndexView& view, const std::vector<std::vector<std::string>>& raw, size_t batch_threshold) {
  const char* stage_times = std::getenv("WARP_GPU_STAGE_TIMES");
  const bool per_query_stats = stage_times != nullptr && std::string(stage_times) == "2";
  gpu::GpuProcessorOptions single_options;
  single_options.lanes = 1;
  single_options.or_method = table_or_method;
  single_options.or_floor = table_or_floor;
  gpu::GpuQueryProcessor gpu_single(view, single_options);
  gpu::GpuProcessorOptions dense_options;
  dense_options.lanes = 1;
  dense_options.or_method = gpu::OrMethod::kDenseAccumulators;
  gpu::GpuQueryProcessor gpu_dense(view, dense_options);
  gpu::GpuProcessorOptions lanes_options;
  lanes_options.lanes = 8;
  lanes_options.or_method = table_or_method;
  lanes_options.or_floor = table_or_floor;
  gpu::GpuQueryProcessor gpu_lanes(view, lanes_options);
  gpu::GpuProcessorOptions batched_options;
  batched_options.or_method = table_or_method;
  batched_options.or_floor = table_or_floor;
  batched_options.batch = {
      .threshold = batch_threshold, .max_queries = batch_max_queries, .max_wait_us = 1000, .executors = batch_streams};
  gpu::GpuQueryProcessor gpu_batched(view, batched_options);
  CpuQueryProcessor cpu_processor(view);
  // The GPU's blocks are compared with BlockMax-WAND's, the CPU's dynamic pruning of record.
  CpuQueryProcessor bmw_processor(view, {OrAlgorithm::kBlockMaxWand});
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  // Enough clients for every stream's batch and the next one forming (64 clients fill only two of
  // three streams of 32 queries).
  const size_t clients =
      batch_clients != 0 ? batch_clients : std::max<size_t>(64, 2 * batch_max_queries * batch_streams);
  std::printf(
      "GPU index %.0f MB resident (%.0f MB of docID-range maxima); batches close at %zu postings of work or %zu "
      "queries, %zu in flight; %zu client threads drive the batched path, 16 the 8-lane path\n\n",
      gpu_single.device_index().stats().bytes_resident / 1e6, gpu_single.device_index().stats().slice_bytes / 1e6,
      batch_threshold, batch_max_queries, batch_streams, clients);
  std::printf(
      "| mode | k | GPU single q/s | p50 / p99 ms | GPU single, dense OR accumulators q/s | GPU 8 lanes q/s | p50 / "
      "p99 ms | GPU batched q/s | p50 / p99 ms | CPU %zu threads q/s | p50 / p99 ms | "
      "CPU %zu threads, BlockMax-WAND q/s | CPU 1 thread ms/query | batched / CPU-%zu | single / CPU-1 (latency) | "
      "blocks decoded per query: GPU / CPU BlockMax-WAND / in the lists |\n",
      cores, cores, cores);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (QueryMode mode : table_modes) {
    for (size_t k : table_ks) {
      std::vector<Query> queries, sample;
      for (const auto& q : raw) queries.push_back({q, mode, k});
      for (size_t i = 0; i < queries.size(); i += 10) sample.push_back(queries[i]);
      size_t mismatches = 0;
      uint64_t gpu_blocks = 0, cpu_blocks = 0, total_blocks = 0;
      std::vector<QueryResult> expected(sample.size());
      for (size_t i = 0; i < sample.size(); ++i) {
        expected[i] = cpu_processor.search(sample[i]);
        const QueryResult bmw = bmw_processor.search(sample[i]);
        if (per_query_stats) {  // beside the OR tiles' line of each GPU path (WARP_GPU_STAGE_TIMES=2)
          std::fprintf(stderr, "cpu query (BlockMax-WAND): blocks %llu of %llu\n",
                       static_cast<unsigned long long>(bmw.stats.blocks_decoded),
                       static_cast<unsigned long long>(bmw.stats.blocks_total));
        }
        const QueryResult single = gpu_single.search(sample[i]);
        gpu_blocks += single.stats.blocks_decoded;
        cpu_blocks += bmw.stats.blocks_decoded;
        total_blocks += bmw.stats.blocks_total;
        mismatches += !same_scores(single, expected[i]) + !same_scores(bmw, expected[i]) +
                      !same_scores(gpu_lanes.search(sample[i]), expected[i]) +
                      !same_scores(gpu_dense.search(sample[i]), expected[i]);
      }
      std::vector<QueryResult> batched_results(sample.size());
      run(sample, clients, [&](const Query& q) { batched_results[&q - sample.data()] = gpu_batched.search(q); });
      for (size_t i = 0; i < sample.size(); ++i) mismatches += !same_scores(batched_results[i], expected[i]);

      // The throughput paths over the log `timed_passes` times: a pass of a fast path lasts ~0.1 s,
      // and the last queries of a pass (up to ~0.2 s on the CPU) leave threads idle.
      std::vector<Query> timed;
      for (size_t pass = 0; pass < timed_passes; ++pass) timed.insert(timed.end(), queries.begin(), queries.end());
      const Timing single = run(timed, 1, [&](const Query& q) { gpu_single.search(q); });
      const Timing dense = run(timed, 1, [&](const Query& q) { gpu_dense.search(q); });
      const Timing lanes = run(timed, 16, [&](const Query& q) { gpu_lanes.search(q); });
      const Timing batched = run(timed, clients, [&](const Query& q) { gpu_batched.search(q); });
      const Timing cpu_all = run(timed, cores, [&](const Query& q) { cpu_processor.search(q); });
      const Timing cpu_bmw = run(timed, cores, [&](const Query& q) { bmw_processor.search(q); });
      const Timing cpu_one = run(sample, 1, [&](const Query& q) { cpu_processor.search(q); });
      const Timing single_sample = run(sample, 1, [&](const Query& q) { gpu_single.search(q); });
      std::printf(
          "| %s | %zu | %.0f | %.3f / %.3f | %.0f | %.0f | %.3f / %.3f | %.0f | %.3f / %.3f | %.0f | %.3f / %.3f | "
          "%.0f | %.2f | %.1f× | %.1f× | %.0f / %.0f / %.0f |%s\n",
          std::string(to_string(mode)).c_str(), k, single.qps, single.p50, single.p99, dense.qps, lanes.qps, lanes.p50,
          lanes.p99, batched.qps, batched.p50, batched.p99, cpu_all.qps, cpu_all.p50, cpu_all.p99, cpu_bmw.qps,
          1e3 / cpu_one.qps, batched.qps / cpu_all.qps, single_sample.qps / cpu_one.qps,
          double(gpu_blocks) / sample.size(), double(cpu_blocks) / sample.size(), double(total_blocks) / sample.size(),
          mismatches ? (" " + std::to_string(mismatches) + " MISMATCHES vs CPU").c_str() : "");
      std::fflush(stdout);
    }
  }
}

void synthetic_query_table(uint32_t documents, uint32_t query_count) {
  synthetic::CollectionParams params;
  params.documents = documents;
  params.vocabulary = 100000;
  params.mean_length = 100;
  params.seed = 5;
  IndexBuilder builder({});
  const auto build_start = Clock::now();
  synthetic::generate_collection(params, [&](const std::vector<std::string>& terms) {
    builder.add_analyzed({"", "", "", 0}, terms);
  });
  const auto built = builder.build();
  const IndexView& view = built[0].view;
  const auto raw = synthetic::generate_queries(query_count, 2000, 4, 9);  // frequent terms: long lists
  uint64_t postings = 0;
  for (const auto& q : raw) {
    for (const auto& t : q) {
      if (const TermInfo* info = view.find(t)) postings += info->df;
    }
  }
  std::printf(
      "\n### Queries: synthetic collection, %u documents, vocabulary 100k, mean length 100, %u queries of 1–4 "
      "terms among the 2,000 most frequent (%.0f postings per query on average); built in %.0f s\n\n",
      documents, query_count, double(postings) / raw.size(),
      std::chrono::duration<double>(Clock::now() - build_start).count());
  query_table(view, raw, 1 << 20);
}

// Device memory of one batch stream (cudaMemGetInfo before and after making its executor, with
// the leaf's defaults and with this table's batches), beside the main arrays of the layout before
// batches were sized by their work (computed from the same index); then every query through one
// executor, AND and OR at k = 1000, with how many were split, and a sample checked against the CPU.
void batch_memory(const IndexView& view, const std::vector<std::vector<std::string>>& raw, size_t batch_threshold) {
  gpu::DeviceIndex device(view);
  const auto used = [] {
    size_t free = 0, total = 0;
    WARP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return total - free;
  };
  const double docs = view.doc_count(), q = double(batch_max_queries), longest = device.max_list_slots();
  const double before = (std::min<double>(batch_threshold, 2 * longest) + longest) * 16 + q * longest * 8 +
                        q * docs * 8 +
                        3 * 8 * std::max<double>(std::min<double>(batch_threshold, 2 * longest) + longest, docs);
  std::printf(
      "Batch stream memory (%.0f documents, longest list %.0f postings, %zu queries a batch): layout before, main "
      "arrays (computed) %.2f GB;",
      docs, longest, batch_max_queries, before / 1e9);
  // The leaf's scheduler sizes its batches itself: its executors take any threshold (2^40).
  for (size_t threshold : {size_t{1} << 40, batch_threshold}) {
    const size_t base = used();
    gpu::BatchExecutor executor(device, {.threshold = threshold, .max_queries = batch_max_queries});
    std::printf(" now, batches closing at %zu postings: %.2f GB%s", threshold, (used() - base) / 1e9,
                threshold == size_t{1} << 40 ? " (the scheduler's executors);" : "\n");
  }
  gpu::BatchExecutor executor(device, {.threshold = batch_threshold, .max_queries = batch_max_queries});
  CpuQueryProcessor cpu(view);
  size_t checked = 0, mismatches = 0;
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr}) {
    std::vector<Query> queries;
    for (const auto& terms : raw) queries.push_back({terms, mode, 1000});
    const std::vector<QueryResult> results = executor.run(queries);
    for (size_t i = 0; i < queries.size(); i += 20, ++checked)
      mismatches += !same_scores(results[i], cpu.search(queries[i]));
  }
  const gpu::BatchExecutor::Splits splits = executor.splits();
  std::printf(
      "AND and OR top-1000 of every query through it: %llu AND queries ran in pieces (%llu pieces), %llu OR queries "
      "ran again alone, %llu AND top-k selections outgrew the batch's; %zu of %zu sampled answers differ from the "
      "CPU's\n\n",
      static_cast<unsigned long long>(splits.and_split), static_cast<unsigned long long>(splits.and_pieces),
      static_cast<unsigned long long>(splits.or_alone), static_cast<unsigned long long>(splits.and_alone), mismatches,
      checked);
  std::fflush(stdout);
}

// Batched throughput on one device against a replica of the index on each of `devices` (the
// leaf's --gpu-devices with --gpu-replicas), same clients, same queries; a sample of each
// configuration's answers checked against the CPU.
void device_table(const IndexView& view, const std::vector<std::vector<std::string>>& raw, size_t batch_threshold,
                  const std::vector<int>& devices) {
  const size_t clients = 2 * batch_max_queries * batch_streams * devices.size();
  std::printf(
      "\n#### Batched queries on 1 and %zu GPUs (a replica of the index on each; batches close at %zu postings or %zu "
      "queries, "
      "%zu in flight per device; %zu client threads; medians of three alternating runs over the log %zu times)\n\n| "
      "mode | k | 1 GPU q/s | p50 / p99 ms | %zu GPUs q/s | p50 / p99 ms | speed-up | "
      "queries per GPU |\n|---|---|---|---|---|---|---|---|\n",
      devices.size(), batch_threshold, batch_max_queries, batch_streams, clients, timed_passes, devices.size());
  gpu::GpuProcessorOptions options;
  options.lanes = 1;
  options.batch = {
      .threshold = batch_threshold, .max_queries = batch_max_queries, .max_wait_us = 1000, .executors = batch_streams};
  options.device = devices[0];
  gpu::GpuQueryProcessor one(view, options);
  gpu::ReplicatedGpuProcessor all(view, devices, options);
  CpuQueryProcessor cpu(view);
  for (QueryMode mode : table_modes) {
    for (size_t k : table_ks) {
      std::vector<Query> queries;
      for (const auto& q : raw) queries.push_back({q, mode, k});
      size_t mismatches = 0;
      for (size_t i = 0; i < queries.size(); i += 50) {
        const QueryResult expected = cpu.search(queries[i]);
        mismatches += !same_scores(one.search(queries[i]), expected) + !same_scores(all.search(queries[i]), expected);
      }
      // The log `timed_passes` times per figure, after an unmeasured pass on each (the executors'
      // first batches), one GPU and all alternating three times, the median of each: one pass of
      // 1,000 queries is under 0.1 s for 384 clients, its threads' start and the last batches'
      // tail then weighed as much as the batches, and single passes varied 0.7-1.9x between calls.
      std::vector<Query> timed;
      for (size_t pass = 0; pass < timed_passes; ++pass) timed.insert(timed.end(), queries.begin(), queries.end());
      run(queries, clients, [&](const Query& q) { one.search(q); });
      run(queries, clients, [&](const Query& q) { all.search(q); });
      const std::vector<uint64_t> before = all.answered();
      std::vector<Timing> ones, alls;
      for (int round = 0; round < 3; ++round) {
        ones.push_back(run(timed, clients, [&](const Query& q) { one.search(q); }));
        alls.push_back(run(timed, clients, [&](const Query& q) { all.search(q); }));
      }
      // Each figure's own median (q/s, p50, p99), not the latencies of the run whose q/s is the median.
      const auto median = [](const std::vector<Timing>& t) {
        const auto of = [&t](double Timing::*field) {
          std::vector<double> v;
          for (const Timing& x : t) v.push_back(x.*field);
          std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
          return v[v.size() / 2];
        };
        Timing m;
        m.qps = of(&Timing::qps);
        m.p50 = of(&Timing::p50);
        m.p99 = of(&Timing::p99);
        return m;
      };
      const Timing t1 = median(ones), tn = median(alls);
      const std::vector<uint64_t> after = all.answered();
      std::string shares;
      for (size_t d = 0; d < after.size(); ++d) shares += (d ? " / " : "") + std::to_string(after[d] - before[d]);
      std::printf("| %s | %zu | %.0f | %.3f / %.3f | %.0f | %.3f / %.3f | %.2f× | %s |%s\n",
                  std::string(to_string(mode)).c_str(), k, t1.qps, t1.p50, t1.p99, tn.qps, tn.p50, tn.p99,
                  tn.qps / t1.qps, shares.c_str(),
                  mismatches ? (" " + std::to_string(mismatches) + " MISMATCHES vs CPU").c_str() : "");
      std::fflush(stdout);
    }
  }
}

std::vector<int> table_devices;  // --devices-table

void gov2_query_table(const synthetic::Gov2Params& params, size_t batch_threshold) {
  const auto start = Clock::now();
  const synthetic::Gov2Collection c = synthetic::make_gov2_like(params);
  std::printf(
      "\n### Queries: GOV2-like preset, %u documents (mean length %.0f), %zu query-term lists (%.2f billion postings, "
      "%s), "
      "%u queries, %.2f million postings per query on average; generated in %.0f s\n\n",
      params.documents, params.mean_length, c.view.lexicon.size(), c.postings / 1e9, params.codec.c_str(),
      params.queries, c.postings_per_query / 1e6, std::chrono::duration<double>(Clock::now() - start).count());
  std::fflush(stdout);
  batch_memory(c.view, c.queries, batch_threshold);
  if (!table_devices.empty()) return device_table(c.view, c.queries, batch_threshold, table_devices);
  query_table(c.view, c.queries, batch_threshold);
}

}  // namespace
}  // namespace warp

int main(int argc, char** argv) {
  using namespace warp;
  Flags flags(
      "usage: gpu_bench [--max-log2 26] [--docs 500000] [--queries 500] [--gov2-docs 25205179] [--no-intersection]");
  flags.value("max-log2", "26", "longest decode list, log2 (0: skip the decode table)")
      .value("min-log2", "16", "shortest decode list, log2")
      .value("decode-codecs", "", "codecs of the decode table, e.g. bp128,rice (empty: all)")
      .value("decode-reps", "30", "timed launches per list of the decode table (median)")
      .boolean("no-decode-cpu", "decode table without the CPU column")
      .value("docs", "0", "documents in the small synthetic query collection (0: skip)")
      .value("queries", "500", "queries per mode of the small collection")
      .value("gov2-docs", "25205179", "documents of the GOV2-like preset (0: skip)")
      .value("gov2-queries", "1000", "queries of the GOV2-like log")
      .value("gov2-codec", "bp128", "codec of the GOV2-like lists")
      .value("batch-threshold", "2000000", "postings of work that close a GPU batch")
      .value("batch-max", "16", "queries that close a GPU batch")
      .value("batch-streams", "2", "GPU batches in flight")
      .value("batch-clients", "0", "client threads of the batched path (0: 2 x batch-max x batch-streams, at least 64)")
      .value("passes", "3", "passes over the query log of each throughput figure of the query tables")
      .value("modes", "and,or,andor", "query modes of the query tables")
      .value("ks", "10,1000", "k of the query tables")
      .value("devices-table", "",
             "GOV2-like preset: batched queries on one GPU against replicas on these, e.g. 0,1 (instead of the query "
             "table)")
      .boolean("no-intersection", "skip the intersection table")
      .boolean("or-unstaged", "OR tiles without pass 2's MaxScore stages (A/B)")
      .boolean("no-or-floor",
               "the GPU's OR tiles with θ from the candidates alone, not from the query's floor too (A/B)");
  try {
    flags.parse(argc, argv);
    if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
    batch_max_queries = static_cast<size_t>(flags.count("batch-max"));
    batch_streams = static_cast<size_t>(flags.count("batch-streams"));
    batch_clients = static_cast<size_t>(flags.count("batch-clients"));
    timed_passes = std::max<size_t>(1, flags.count("passes"));
    if (flags.is_set("or-unstaged")) table_or_method = gpu::OrMethod::kTilesUnstaged;
    table_or_floor = !flags.is_set("no-or-floor");
    table_modes.clear();
    std::stringstream modes(flags.get("modes"));
    for (std::string mode; std::getline(modes, mode, ',');) table_modes.push_back(parse_query_mode(mode));
    if (!flags.get("devices-table").empty()) table_devices = gpu::parse_gpu_devices(flags.get("devices-table"));
    table_ks.clear();
    std::stringstream ks(flags.get("ks"));
    for (std::string k; std::getline(ks, k, ',');) table_ks.push_back(std::stoul(k));
    std::string why;
    if (!gpu::gpu_available(&why)) {
      std::fprintf(stderr, "gpu_bench: no usable GPU (%s)\n", why.c_str());
      return 1;
    }
    const double copy = gpu::device_copy_gbps(size_t{1} << 30);
    std::printf("device: %s\n\nceiling: device-to-device copy %.0f GB/s (1 GiB, bytes read + written, median of 20)\n",
                gpu::gpu_description().c_str(), copy);
    if (flags.count("max-log2") > 0) {
      DecodeTableOptions options;
      options.min_log2 = static_cast<int>(flags.count("min-log2"));
      options.max_log2 = static_cast<int>(flags.count("max-log2"));
      options.repetitions = static_cast<int>(std::max<size_t>(1, flags.count("decode-reps")));
      options.cpu = !flags.is_set("no-decode-cpu");
      std::stringstream codecs(flags.get("decode-codecs"));
      for (std::string codec; std::getline(codecs, codec, ',');) options.codecs.push_back(codec);
      decode_table(options, copy);
    }
    if (!flags.is_set("no-intersection")) intersection_table();
    if (flags.count("docs") > 0)
      synthetic_query_table(static_cast<uint32_t>(flags.count("docs")), static_cast<uint32_t>(flags.count("queries")));
    if (flags.count("gov2-docs") > 0) {
      synthetic::Gov2Params params;
      params.documents = static_cast<uint32_t>(flags.count("gov2-docs"));
      params.queries = static_cast<uint32_t>(flags.count("gov2-queries"));
      params.codec = flags.get("gov2-codec");
      gov2_query_table(params, flags.count("batch-threshold"));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}
