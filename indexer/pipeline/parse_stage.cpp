#include "indexer/pipeline/parse_stage.hpp"

#include <malloc.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "common/analysis/shared_stem_cache.hpp"
#include "indexer/pipeline/collection_assignment.hpp"
#include "indexer/pipeline/gpu_analysis_start.hpp"
#include "indexer/pipeline/parser.hpp"
#include "indexer/postings/trie_collections.hpp"

namespace warp::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// Collections to indexer slots by a sample's token counts (no sample when one slot takes them
// all); with GPU indexers the sample also measures how much faster a GPU indexer is, and it takes
// that many times a CPU indexer's share.
std::vector<uint32_t> plan_owners(const BuildPlan& plan, const PipelineOptions& options, const std::string& spill_dir,
                                  PipelineReport& report) {
  std::vector<double> speed(plan.slots, 1.0);
  if (plan.parsers_index) speed[0] = static_cast<double>(plan.parsers);
  std::vector<uint64_t> sampled;
  if (plan.gpu_indexers > 0) {
    // The GPU's context is made (a few hundred ms) while the sample is read.
    auto probe = std::async(std::launch::async, [&] {
      return make_gpu_indexer({900001, spill_dir, [] { return ~uint64_t{0}; }, nullptr},
                              {options.gpu_device, options.gpu_hash_bits});
    });
    Piece sample;
    sampled = sample_tokens(plan.splits, plan.chunk_bytes, options.build.analyzer, &sample);
    const std::unique_ptr<Indexer> gpu_indexer = probe.get();
    report.gpu_speed = options.gpu_speed > 0 ? options.gpu_speed : measure_gpu_speed(sample, spill_dir, *gpu_indexer);
    std::fill(speed.begin() + static_cast<std::ptrdiff_t>(plan.cpu_slots), speed.end(), report.gpu_speed);
  } else if (plan.slots > 1) {
    sampled = sample_tokens(plan.splits, plan.chunk_bytes, options.build.analyzer);
  }
  return plan.slots > 1 ? assign_collections(sampled, speed) : std::vector<uint32_t>(kTrieCollections, 0);
}

// The parse figures of the report, from what the threads summed.
void report_parse(const ParseShared& shared, const GpuAnalysisStart& gpu_start, const SharedStemCache& shared_stems,
                  PipelineReport& report) {
  report.runs_written = shared.runs_written;
  report.excluded = shared.excluded;
  report.gpu_analysis_documents = shared.gpu_documents;
  report.gpu_analysis_cpu_documents = shared.gpu_cpu_documents;
  report.gpu_analysis_early_documents = shared.gpu_early_documents;
  if (shared.options.gpu_analysis && !shared.plan.gpu_unused) {
    report.gpu_analysis_ready_first = gpu_start.ready_first();
    report.gpu_analysis_ready_last = gpu_start.ready_last();
  }
  report.gpu_analysis_failure = shared.gpu_failure;
  report.gpu_analysis_tokens = shared.gpu_tokens;
  report.gpu_analysis_run_postings = shared.gpu_run_postings;
  report.gpu_analysis_misses = shared.gpu_misses;
  report.gpu_analysis_seconds = shared.gpu_seconds;
  report.routed_postings = shared.router != nullptr ? shared.router->routed() : 0;
  report.stem_cache_segments = shared_stems.segments();
  report.stem_cache_stems = shared_stems.stems();
  report.stem_cache_frozen = shared_stems.frozen();
}

}  // namespace

ParseOutput parse_inputs(const BuildPlan& plan, const PipelineOptions& options, const std::string& spill_dir,
                         DocTable& docs, ReadReport& read, PipelineReport& report,
                         const std::function<void(const PipelineProgress&)>& on_progress,
                         std::chrono::steady_clock::time_point build_start) {
  SharedStemCache shared_stems(plan.shared_first, plan.shared_most);
  // An indexer's share: nine tenths of the budget (heap overheads) less what is in flight, the
  // CUDA driver's, the per-document arrays and the parsers' arrays by stem id (`used`).
  const uint64_t in_flight = plan.in_flight + shared_stems.first_segment_bytes() + plan.gpu_runtime;
  const auto share_besides = [&plan, in_flight](uint64_t used) -> uint64_t {
    used += in_flight;
    const uint64_t usable = plan.budget / 10 * 9;
    return std::max<uint64_t>(usable > used ? (usable - used) / (plan.cpu_indexers + plan.gpu_indexers) : 0, 64u << 10);
  };
  // Where the device inverts the chunks, each parser's run on it is sized with its analyzer, beside
  // the parsers (on a parser's thread its allocations had waited on the driver with the others'
  // set-up): as ParserIndexer::device_run_room() sizes it from the share at the start.
  const size_t device_run_postings =
      plan.own_takes_all ? ParserIndexer::device_run_room(share_besides(0)) + plan.chunk_bytes / 2 : 0;
  GpuAnalysisStart gpu_start(plan, options, shared_stems.capacity(), device_run_postings, build_start);

  auto split_taker = std::make_unique<SplitTaker>(plan.split_sizes, plan.parsers);
  std::unique_ptr<PostingRouter> router =
      plan.route ? std::make_unique<PostingRouter>(plan.parsers, 2 * plan.parsers * kHandOverPostings) : nullptr;
  ParseShared shared(plan, options, spill_dir, docs, shared_stems, gpu_start, *split_taker, router.get());
  shared.owner = plan_owners(plan, options, spill_dir, report);
  // An indexer's share, as the documents, the shared stems and the stem cache's segments grow.
  shared.share = [&] {
    return share_besides(docs.memory_bytes() + plan.stem_array_bytes * shared_stems.stems() +
                         (shared_stems.memory_bytes() - shared_stems.first_segment_bytes()));
  };
  shared.parser_runs.resize(plan.parsers);
  // Indexers with threads of their own, each behind a queue (none for the parsers' own slot).
  std::vector<std::unique_ptr<Indexer>> indexers;
  for (size_t i = 0; i < plan.slots; ++i) {
    shared.pieces.push_back(std::make_unique<BoundedQueue<Piece>>(plan.parsers));
    const IndexerContext context{i, spill_dir, shared.share, &shared.runs_written};
    if (i < plan.cpu_slots) {
      indexers.push_back(plan.parsers_index ? nullptr : make_cpu_indexer(context));
    } else {
      indexers.push_back(make_gpu_indexer(context, {options.gpu_device, options.gpu_hash_bits}));
    }
  }
  std::vector<std::thread> indexer_threads, parser_threads;
  for (size_t i = plan.parsers_index ? 1 : 0; i < plan.slots; ++i) {
    indexer_threads.emplace_back([&, i] {
      try {
        while (auto piece = shared.pieces[i]->pop()) indexers[i]->consume(*piece);
        indexers[i]->spill();
      } catch (...) {
        shared.record_failure();
        while (shared.pieces[i]->pop()) {  // keep draining so parsers never block forever
        }
      }
    });
  }
  size_t parsers_running = plan.parsers;
  std::mutex done_mutex;
  std::condition_variable done;
  for (size_t t = 0; t < plan.parsers; ++t) {
    parser_threads.emplace_back([&, t] {
      try {
        run_parser(shared, t);
      } catch (...) {  // an unreadable input: stop everything cleanly, then report it
        shared.record_failure();
      }
      std::lock_guard<std::mutex> lock(done_mutex);
      --parsers_running;
      done.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(done_mutex);
    while (parsers_running > 0) {  // progress four times a second: a build of a second shows some
      if (!done.wait_for(lock, std::chrono::milliseconds(250), [&] { return parsers_running == 0; }) && on_progress) {
        on_progress({docs.documents(), shared.bytes_read.load(), plan.total_file_bytes, shared.runs_written.load()});
      }
    }
  }
  for (auto& thread : parser_threads) thread.join();
  for (auto& queue : shared.pieces) queue->close();
  for (auto& thread : indexer_threads) thread.join();
  if (shared.failure) std::rethrow_exception(shared.failure);
  gpu_start.finish();  // a GPU that failed to start fails the build, with its reason

  ParseOutput out;
  for (std::vector<RunInfo>& of_parser : shared.parser_runs) {
    for (RunInfo& run : of_parser) out.runs.push_back(std::move(run));
  }
  for (auto& indexer : indexers) {
    if (indexer == nullptr) continue;
    for (RunInfo& run : indexer->runs()) out.runs.push_back(std::move(run));
    report.gpu_seconds += indexer->gpu_seconds();
    report.gpu_fallbacks += indexer->cpu_fallbacks();
  }
  indexers.clear();
  shared.pieces.clear();
  ::malloc_trim(0);  // the parse phase's freed heap back to the system before the back end
  report_parse(shared, gpu_start, shared_stems, report);
  report.runs_merged = out.runs.size();
  read.bytes = shared.bytes_read;
  report.parse_seconds = std::chrono::duration<double>(Clock::now() - build_start).count();
  out.split_taker = std::move(split_taker);
  return out;
}

}  // namespace warp::pipeline
