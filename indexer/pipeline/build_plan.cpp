#include "indexer/pipeline/build_plan.hpp"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <thread>

#include "common/analysis/analyzer.hpp"
#include "common/analysis/shared_stem_cache.hpp"
#include "common/codec/codec.hpp"
#include "common/util/status.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/pipeline/posting_router.hpp"

namespace warp::pipeline {
namespace fs = std::filesystem;

namespace {

// Threads, slots and routing from the options.
void plan_threads(const PipelineOptions& options, BuildPlan& plan) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  plan.threads = options.threads ? options.threads : cores;
  // By default every parser indexes its own chunks' postings with a CPU indexer of its own (no
  // queues, no handing over: each thread works like a one-thread build). With --indexers N, N
  // indexer threads own the collections instead (Wei & JaJa's split) and the parsers hand them
  // pieces. GPU indexers always own their collections and take pieces.
  plan.parsers_index = options.indexers == 0;
  plan.indexers = plan.parsers_index ? 0 : options.indexers;
  plan.parsers =
      options.parsers ? options.parsers : std::max<size_t>(1, plan.threads - std::min(plan.threads - 1, plan.indexers));
  plan.gpu_indexers = options.gpu_indexers;
  plan.cpu_slots = plan.parsers_index ? 1 : plan.indexers;
  plan.slots = plan.cpu_slots + plan.gpu_indexers;
  plan.cpu_indexers = plan.parsers_index ? plan.parsers : plan.indexers;
  plan.own_takes_all = plan.parsers_index && plan.slots == 1;
  plan.route = plan.own_takes_all && plan.parsers > 1 && !options.gpu_analysis && options.route_postings;
}

// The memory budget among chunks in flight and stem caches (the indexers share what is left, as
// the documents and the shared stems grow: parse_stage.cpp).
void plan_memory(const PipelineOptions& options, BuildPlan& plan) {
  const size_t parsers = plan.parsers;
  const uint64_t budget = plan.budget = std::max<uint64_t>(options.memory_budget, 1u << 20);
  // In flight, per parser: the chunk it analyzes (its documents and, for indexer threads, their
  // postings: about 3× its input bytes) and, where indexer threads or GPU indexers take pieces,
  // up to one piece queued for each of them: about 9 chunks a parser, a quarter of the budget;
  // 3 where every parser indexes its own chunks alone (no pieces).
  const bool pieces_flow = !plan.parsers_index || plan.gpu_indexers > 0;
  plan.chunk_bytes =
      options.chunk_bytes ? options.chunk_bytes : std::clamp<uint64_t>(budget / (36 * parsers), 64u << 10, 4u << 20);
  // Stem caches, a quarter of the budget at most: one shared by every parser (its first segment a
  // power of two of tokens, 2^12 to 2^21, and more segments as the vocabulary outgrows it), each
  // parser's own for the words it misses once that one is full (2^10 to 2^14), and the parsers'
  // arrays by stem id (counts and collections where pieces flow, 4 bytes each, and their
  // indexers' lists, 12: per stem of the shared cache, per parser; counted as they grow). A word
  // that is not cached is stemmed and its term looked up in the dictionary again: per-parser
  // caches of 2^18 tokens at 16 threads under 2 GiB built 2 GiB of Zipfian text (500,000 words)
  // in 7.5-7.9 s, this shared one in 5.5-5.7 s (tests/bench/results/indexing.md).
  plan.stem_array_bytes = (sizeof(uint32_t) * (plan.own_takes_all ? 1 : 2) +
                           (plan.parsers_index ? ParserIndexer::kBytesPerSharedStem : 0)) *
                          parsers;
  plan.own_stem_cache =
      std::bit_floor(std::clamp<uint64_t>(budget / (32 * parsers * Analyzer::kStemCacheEntryBytes), 1024, 1u << 14));
  const uint64_t stem_cache_bytes =
      budget / 4 - std::min<uint64_t>(budget / 4, parsers * plan.own_stem_cache * Analyzer::kStemCacheEntryBytes);
  // The first segment: 2^20 tokens for one parser (what its own cache had), 2^21 for more; a
  // larger one had cost every corpus its pages (2^22 for one parser: +216 MiB peak RSS and 8% more
  // time at 500,000 words, tests/bench/results/indexing.md). Later segments take the rest of the
  // quarter as the vocabulary reaches them; at 5 million words a one-thread build had stemmed each
  // of the tail's words at every occurrence, 4× slower. The GPU's analysis mirrors the first
  // segment on the device (GpuTokenTable) and its inversion sizes arrays by it: there the cache
  // stays one segment.
  const uint64_t shared_cap = parsers > 1 ? 1u << 21 : 1u << 20;
  const uint64_t shared_most = stem_cache_bytes / (SharedStemCache::kEntryBytes + plan.stem_array_bytes);
  plan.shared_most = !options.gpu_analysis && plan.gpu_indexers == 0 ? shared_most : 0;
  plan.shared_first = options.stem_cache_tokens
                          ? options.stem_cache_tokens
                          : std::bit_floor(std::clamp<uint64_t>(shared_most, 1u << 12, shared_cap));
  // With the GPU's analysis, a parser holds its chunk's text again (pinned), 8 bytes a token (offset
  // and stem id) and 12 a posting of the chunk's inversion: about 5 chunks more, and the slice its
  // runs come back through. Parsers that index their own chunks on the CPU hand each other the
  // postings of the shared stems they own (posting_router.hpp): a parser holds up to
  // kHandOverPostings (and a document's more) before it hands them over, the inboxes two of those
  // a parser (and one more each from senders that handed over before they saw the bound), and
  // emptied buffers keep their capacity: four hand-overs a parser.
  const uint64_t routing_bytes = plan.route ? 4 * parsers * kHandOverPostings * sizeof(RoutedPosting) : 0;
  plan.in_flight = ((pieces_flow ? 9 : 3) + (options.gpu_analysis ? 5 : 0)) * parsers * plan.chunk_bytes +
                   routing_bytes + (options.gpu_analysis ? parsers * GpuAnalyzer::kRunFetch * sizeof(Posting) : 0) +
                   parsers * plan.own_stem_cache * Analyzer::kStemCacheEntryBytes;
}

// The inputs and their splits.
void plan_splits_of(const std::vector<std::string>& inputs, const PipelineOptions& options, BuildPlan& plan) {
  plan.files = expand_input_paths(inputs);
  for (const std::string& file : plan.files) plan.total_file_bytes += fs::file_size(file);
  // By default sixteen splits per parser over the input, 1–64 MiB each: small enough that the
  // parsers finish together (four a parser left a tail of one split's time: 5% at 16 threads).
  const uint64_t split_bytes =
      options.split_bytes ? options.split_bytes
                          : std::clamp<uint64_t>(plan.total_file_bytes / (16 * plan.parsers), 1u << 20, 64u << 20);
  plan.splits = plan_splits(plan.files, split_bytes);
  for (const InputSplit& split : plan.splits) {
    const uint64_t end =
        split.end != UINT64_MAX ? split.end : std::max<uint64_t>(fs::file_size(split.path), split.begin);
    plan.split_sizes.push_back(end - split.begin);
  }
}

}  // namespace

BuildPlan plan_build(const std::vector<std::string>& inputs, const PipelineOptions& options) {
  if (options.build.partitions == 0) throw Error("the number of partitions must be at least 1");
  codec_by_name(options.build.codec);  // fail before reading on an unknown codec
  if (options.gpu_analysis && options.build.analyzer.remove_stopwords) {
    throw Error(
        "--gpu-analysis does not remove stop words: build without --stopwords english, or without --gpu-analysis");
  }
  BuildPlan plan;
  plan_threads(options, plan);
  plan_memory(options, plan);
  plan_splits_of(inputs, options, plan);
  // Too little input a parser for the GPU to repay its start-up: the CPU analyzes everything,
  // but a usable GPU is still required (the build fails without one, as it would have).
  plan.bytes_per_parser = plan.total_file_bytes / std::max<size_t>(plan.parsers, 1);
  plan.gpu_unused = options.gpu_analysis && (plan.bytes_per_parser < options.gpu_analysis_min_bytes ||
                                             options.memory_budget < options.gpu_analysis_min_budget);
  // The CUDA driver's own host memory where the GPU analysis runs (context, module images, its
  // pools): measured ~185 MiB on the H100 host (2 GiB at a 512 MiB budget peaked at 820 MiB,
  // against the CPU build's 635, before it was counted here).
  plan.gpu_runtime = options.gpu_analysis && !plan.gpu_unused ? uint64_t{192} << 20 : 0;
  return plan;
}

}  // namespace warp::pipeline
