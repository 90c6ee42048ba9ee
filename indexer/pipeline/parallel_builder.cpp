#include "indexer/pipeline/parallel_builder.hpp"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <bit>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/index/index_files.hpp"
#include "common/index/partition_store.hpp"
#include "common/util/bounded_queue.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"
#include "indexer/gpu/gpu_analyzer.hpp"
#include "indexer/pipeline/doc_table.hpp"
#include "indexer/pipeline/final_order.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/pipeline/run_file.hpp"
#include "indexer/pipeline/trie_collections.hpp"

namespace warp::pipeline {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Postings a parser holds for other parsers before it hands them over (PostingRouter), 768 KiB:
// at 16 threads a parser indexes ~5 million postings a second (2 GiB, 154 million postings, a
// parse of ~1.9 s on the H200 host), so it hands over, and takes its own inbox, every ~13 ms.
constexpr size_t kHandOverPostings = size_t{1} << 16;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr uint32_t kNoCollection = 0xFFFFFFFFu;

// A parser's run of shared-stem postings on its GPU analyzer, for its indexer's spills, and the
// chunks it came from: where the device fails, they are read and analyzed again on the CPU.
class GpuRun final : public RunOnDevice {
 public:
  struct Chunk {
    size_t split = 0;
    uint64_t first = 0;  // documents of the split before the chunk's
    DocId base = 0;
    std::vector<uint8_t> on_device;  // per document: its shared stems are the device's
  };
  using Replay = std::function<void(const std::vector<Chunk>&, const Sink&)>;
  // `fail_step`: tests: the first spill fails at its sort (0), order (1) or first fetch (2).
  GpuRun(GpuAnalyzer& gpu, Replay replay, int fail_step)
      : gpu_(gpu), replay_(std::move(replay)), fail_step_(fail_step) {}
  void sort(std::vector<uint32_t>& stems, std::vector<uint32_t>& begins, std::vector<uint32_t>& by_prefix,
            std::vector<uint64_t>& prefixes) override {
    fail_if(0);
    gpu_.sort_run(stems, begins);
    gpu_.order_run_stems(by_prefix, prefixes);
  }
  void order(const std::vector<uint32_t>& out_begins) override {
    fail_if(1);
    gpu_.order_run(out_begins);
  }
  const Posting* fetch(size_t from, size_t count) override {
    static_assert(sizeof(Posting) == 2 * sizeof(uint32_t) && offsetof(Posting, doc) == 0 &&
                  offsetof(Posting, freq) == 4);
    fail_if(2);
    return reinterpret_cast<const Posting*>(gpu_.fetch_run(from, count));
  }
  size_t fetch_max() const override { return GpuAnalyzer::kRunFetch; }
  void replay(const Sink& sink) override { replay_(chunks, sink); }
  void clear() override {
    gpu_.clear_run();
    chunks.clear();
  }
  std::vector<Chunk> chunks;  // in the run, in the order appended

 private:
  void fail_if(int step) {
    if (step == fail_step_) throw Error("a GPU failure simulated by a test");
  }
  GpuAnalyzer& gpu_;
  Replay replay_;
  int fail_step_;
};

// Collections to indexers by sampled token counts, heaviest first onto the indexer with the least
// load for its speed (`speed`: 1 for a CPU indexer, the measured ratio for a GPU indexer).
std::vector<uint32_t> assign_collections(const std::vector<uint64_t>& tokens, const std::vector<double>& speed) {
  const size_t indexers = speed.size();
  std::vector<uint32_t> owner(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) owner[c] = c % indexers;  // unseen collections
  std::vector<uint32_t> order(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return tokens[a] > tokens[b]; });
  std::vector<double> load(indexers, 0);
  for (uint32_t c : order) {
    if (tokens[c] == 0) break;
    size_t best = 0;
    for (size_t i = 1; i < indexers; ++i) {
      if ((load[i] + tokens[c]) / speed[i] < (load[best] + tokens[c]) / speed[best]) best = i;
    }
    owner[c] = static_cast<uint32_t>(best);
    load[best] += tokens[c];
  }
  return owner;
}

// The first `bytes` of the input, analyzed: token counts per collection, and (when `postings` is
// given) its postings as one piece, docs numbered from 0.
std::vector<uint64_t> sample_tokens(const std::vector<InputSplit>& splits, uint64_t bytes, const AnalyzerConfig& config,
                                    Piece* postings = nullptr) {
  std::vector<uint64_t> tokens(kTrieCollections, 0);
  if (splits.empty()) return tokens;
  Analyzer analyzer(config);
  analyzer.limit_stem_cache(1024);
  SplitReader reader(splits.front());
  SourceDocument doc;
  std::vector<std::string> terms;
  std::map<std::string_view, uint32_t> counts;
  for (uint32_t d = 0; reader.bytes_read() < bytes && reader.next(doc); ++d) {
    terms.clear();
    analyzer.analyze(doc.title, terms);
    analyzer.analyze(doc.body, terms);
    for (const std::string& term : terms) ++tokens[trie_collection(term)];
    if (postings == nullptr) continue;
    counts.clear();
    for (const std::string& term : terms) ++counts[term];
    for (const auto& [term, freq] : counts) {
      const uint32_t collection = trie_collection(term);
      const std::string_view suffix = trie_suffix(term, collection);
      postings->entries.push_back({collection, static_cast<uint32_t>(postings->suffixes.size()),
                                   static_cast<uint32_t>(suffix.size()), d, freq});
      postings->suffixes.append(suffix);
    }
  }
  return tokens;
}

// How many CPU indexers' worth of postings one GPU indexer takes: both index the sample (the GPU
// warmed up first), the ratio of their times, within [0.5, 64].
double measure_gpu_speed(const Piece& sample, const std::string& spill_dir, Indexer& gpu_indexer) {
  const auto timed = [&](Indexer& indexer, const Piece& piece) {
    const auto start = Clock::now();
    indexer.consume(piece);
    indexer.spill();
    for (const RunInfo& run : indexer.runs()) fs::remove(run.path);
    indexer.runs().clear();
    return seconds_since(start);
  };
  const auto cpu_indexer = make_cpu_indexer({900002, spill_dir, [] { return ~uint64_t{0}; }, nullptr});
  Piece warm_up;
  warm_up.suffixes = "x";
  warm_up.entries.push_back({0, 0, 1, 0, 1});
  timed(gpu_indexer, warm_up);
  if (sample.entries.size() < 10000) return 4.0;  // too little to time: a GPU indexer counts as four
  const double gpu_seconds = timed(gpu_indexer, sample), cpu_seconds = timed(*cpu_indexer, sample);
  return std::clamp(cpu_seconds / std::max(gpu_seconds, 1e-6), 0.5, 64.0);
}

// Boundaries of `parts` term ranges of about equal run bytes, from the runs' sparse indexes.
std::vector<std::string> term_ranges(const std::vector<RunInfo>& runs, size_t parts) {
  std::vector<std::pair<std::string_view, uint64_t>> samples;  // term, bytes up to the next sample
  uint64_t total = 0;
  for (const RunInfo& run : runs) {
    for (size_t i = 0; i < run.index.size(); ++i) {
      const uint64_t next = i + 1 < run.index.size() ? run.index[i + 1].offset : run.bytes;
      samples.emplace_back(run.index[i].term, next - run.index[i].offset);
      total += next - run.index[i].offset;
    }
  }
  std::sort(samples.begin(), samples.end());
  std::vector<std::string> bounds;
  uint64_t running = 0;
  size_t part = 1;
  for (const auto& [term, bytes] : samples) {
    if (part >= parts) break;
    if (running >= total * part / parts && !term.empty() && (bounds.empty() || bounds.back() < term)) {
      bounds.emplace_back(term);
      ++part;
    }
    running += bytes;
  }
  return bounds;
}

// One term range of the back end: a k-way merge of every run over [lo, hi), final docIDs, lists
// encoded per partition into that partition's SST files for the range.
struct RangeOutput {
  std::vector<SstRows::Done> lexicon, postings;  // by partition
  std::vector<uint64_t> terms, posting_count, list_bytes;
};

RangeOutput merge_range(const std::vector<RunInfo>& runs, const std::string& lo, const std::string* hi,
                        size_t buffer_bytes, const DocTable& docs, const std::vector<DocId>& span_starts,
                        const std::vector<PartitionEncoder>& encoders, const std::vector<std::string>& partition_dirs,
                        size_t range) {
  const size_t parts = encoders.size();
  RangeOutput out;
  out.terms.assign(parts, 0), out.posting_count.assign(parts, 0), out.list_bytes.assign(parts, 0);
  std::vector<std::unique_ptr<SstRows>> lexicon, postings;
  char name[64];
  for (size_t p = 0; p < parts; ++p) {
    std::snprintf(name, sizeof name, "/ingest-lexicon-%04zu.sst", range);
    lexicon.push_back(std::make_unique<SstRows>(SstRows::Family::kLexicon, partition_dirs[p] + name));
    std::snprintf(name, sizeof name, "/ingest-postings-%04zu.sst", range);
    postings.push_back(std::make_unique<SstRows>(SstRows::Family::kPostings, partition_dirs[p] + name));
  }
  std::vector<std::unique_ptr<RunCursor>> cursors;
  for (const RunInfo& run : runs) cursors.push_back(std::make_unique<RunCursor>(run, lo, buffer_bytes, hi));
  // The heap orders the runs by their current terms' 8-byte prefixes as integers, the texts
  // compared only on equal prefixes: every run holds nearly every term, so each term took 2 log2(runs)
  // comparisons of texts per run (a tenth of the merge's time at 16 runs, a third at 4,600). A scan of
  // every run for the smallest prefix ran as fast at 16 and at 4,600 runs, but costs every run per
  // term where runs hold few of the terms (a long-tailed vocabulary); the heap costs log2(runs).
  // Runs holding one term pop in the order of `runs`: where that is docID order (the parsers' runs,
  // parser by parser), a term's parts come in docID order and need no reordering afterwards
  // (to_final_doc_order) but around the splits parsers took from others' ranges at the end; in an
  // arbitrary order, 95-99% of the lists had had their parts sorted and copied again. (Runs cut
  // where a parser takes another's split made every list ordered, but 12-18 more runs at 16
  // threads cost the merge what the ordering saved.)
  std::vector<uint64_t> keys(cursors.size());
  const auto later = [&](size_t a, size_t b) {
    if (keys[a] != keys[b]) return keys[a] > keys[b];
    const int order = cursors[a]->term().compare(cursors[b]->term());
    return order != 0 ? order > 0 : a > b;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (cursors[i]->valid()) keys[i] = term_prefix(cursors[i]->term()), heap.push(i);
  }
  std::vector<Posting> list, scratch;
  TermBests bests;
  std::vector<size_t> segments;  // where each run's part of the list starts
  std::vector<ListPiece> pieces;
  std::vector<uint32_t> words;
  std::string term;
  while (!heap.empty() && (hi == nullptr || cursors[heap.top()]->term() < *hi)) {
    term = cursors[heap.top()]->term();
    const uint64_t key = keys[heap.top()];
    list.clear(), segments.clear();
    while (!heap.empty() && keys[heap.top()] == key && cursors[heap.top()]->term() == term) {
      const size_t c = heap.top();
      heap.pop();
      segments.push_back(list.size());
      cursors[c]->take(list);
      if (cursors[c]->valid()) keys[c] = term_prefix(cursors[c]->term()), heap.push(c);
    }
    to_final_doc_order(list, segments, docs.final_ids(), span_starts, scratch, pieces);
    if (list.empty()) continue;
    const uint64_t cf = PartitionEncoder::collection_frequency(list);
    for (size_t p = 0; p < parts; ++p) {
      TermInfo info;
      uint64_t count = 0;
      if (!encoders[p].encode(list, cf, info, words, count, &bests)) continue;
      const uint32_t list_crc = crc32_of(words.data(), size_t{info.words} * 4);
      lexicon[p]->put_term(term, info, list_crc, bests.tops, bests.rank_floors);
      postings[p]->put_list(term, words.data(), info.words);
      ++out.terms[p];
      out.posting_count[p] += count;
      out.list_bytes[p] += size_t{info.words} * 4;
    }
  }
  for (size_t p = 0; p < parts; ++p) {
    out.lexicon.push_back(lexicon[p]->finish());
    out.postings.push_back(postings[p]->finish());
  }
  return out;
}

}  // namespace

size_t merge_concurrency(uint64_t budget, uint64_t runs, size_t threads, uint64_t open_files) {
  runs = std::max<uint64_t>(runs, 1);
  const uint64_t by_memory = budget / (4 * runs * kMinMergeBuffer);
  const uint64_t by_files = open_files > kFilesSpared ? (open_files - kFilesSpared) / runs : 0;
  return static_cast<size_t>(std::clamp<uint64_t>(std::min(by_memory, by_files), 1, std::max<size_t>(threads, 1)));
}

PipelineReport build_index(const std::vector<std::string>& inputs, const PipelineOptions& options,
                           const std::string& out_dir, ReadReport& read,
                           const std::function<void(const PipelineProgress&)>& on_progress) {
  const auto start = Clock::now();
  if (options.build.partitions == 0) throw Error("the number of partitions must be at least 1");
  codec_by_name(options.build.codec);  // fail before reading on an unknown codec
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = options.threads ? options.threads : cores;
  // By default every parser indexes its own chunks' postings with a CPU indexer of its own (no
  // queues, no handing over: each thread works like a one-thread build). With --indexers N, N
  // indexer threads own the collections instead (Wei & JaJa's split) and the parsers hand them
  // pieces. GPU indexers always own their collections and take pieces.
  const bool parsers_index = options.indexers == 0;
  const size_t indexers = parsers_index ? 0 : options.indexers;
  const size_t parsers =
      options.parsers ? options.parsers : std::max<size_t>(1, threads - std::min(threads - 1, indexers));
  const size_t gpu_indexers = options.gpu_indexers;
  // Indexer slots: the CPU side (the parsers' own indexers as one slot, or the indexer threads),
  // then the GPU indexers.
  const size_t cpu_slots = parsers_index ? 1 : indexers;
  const size_t slots = cpu_slots + gpu_indexers;
  const size_t cpu_indexers = parsers_index ? parsers : indexers;  // indexers that hold postings
  PipelineReport report;
  report.parsers_index = parsers_index;
  report.parsers = parsers, report.indexers = indexers, report.backend_threads = threads;
  const uint64_t budget = std::max<uint64_t>(options.memory_budget, 1u << 20);
  // In flight, per parser: the chunk it analyzes (its documents and, for indexer threads, their
  // postings: about 3× its input bytes) and, where indexer threads or GPU indexers take pieces,
  // up to one piece queued for each of them: about 9 chunks a parser, a quarter of the budget;
  // 3 where every parser indexes its own chunks alone (no pieces).
  const bool pieces_flow = !parsers_index || gpu_indexers > 0;
  if (options.gpu_analysis && options.build.analyzer.remove_stopwords) {
    throw Error(
        "--gpu-analysis does not remove stop words: build without --stopwords english, or without --gpu-analysis");
  }
  const uint64_t chunk_bytes =
      options.chunk_bytes ? options.chunk_bytes : std::clamp<uint64_t>(budget / (36 * parsers), 64u << 10, 4u << 20);
  // Stem caches, a quarter of the budget at most: one shared by every parser (its first segment a
  // power of two of tokens, 2^12 to 2^21, and more segments as the vocabulary outgrows it), each
  // parser's own for the words it misses once that one is full (2^10 to 2^14), and the parsers'
  // arrays by stem id (counts and collections where
  // pieces flow, 4 bytes each, and their indexers' lists, 12: per stem of the shared cache, per
  // parser; counted as they grow, in share() below). A word that is not cached is stemmed and its
  // term looked up in the dictionary again: per-parser caches of 2^18 tokens at 16 threads under
  // 2 GiB built 2 GiB of Zipfian text (500,000 words) in 7.5-7.9 s, this shared one in 5.5-5.7 s
  // (tests/bench/results/indexing.md).
  const bool own_takes_all = parsers_index && slots == 1;
  const uint64_t stem_array_bytes =
      (sizeof(uint32_t) * (own_takes_all ? 1 : 2) + (parsers_index ? ParserIndexer::kBytesPerSharedStem : 0)) * parsers;
  const size_t own_stem_cache =
      std::bit_floor(std::clamp<uint64_t>(budget / (32 * parsers * Analyzer::kStemCacheEntryBytes), 1024, 1u << 14));
  const uint64_t stem_cache_bytes =
      budget / 4 - std::min<uint64_t>(budget / 4, parsers * own_stem_cache * Analyzer::kStemCacheEntryBytes);
  // The first segment: 2^20 tokens for one parser (what its own cache had), 2^21 for more; a
  // larger one had cost every corpus its pages (2^22 for one parser: +216 MiB peak RSS and 8% more
  // time at 500,000 words, tests/bench/results/indexing.md). Later segments take the rest of the quarter as the
  // vocabulary reaches them, counted then (share() below); at 5 million words a one-thread build
  // had stemmed each of the tail's words at every occurrence, 4× slower. The GPU's analysis mirrors
  // the first segment on the device (GpuTokenTable) and its inversion sizes arrays by it: there the
  // cache stays one segment.
  const uint64_t shared_cap = parsers > 1 ? 1u << 21 : 1u << 20;
  const uint64_t shared_most = stem_cache_bytes / (SharedStemCache::kEntryBytes + stem_array_bytes);
  const bool shared_grows = !options.gpu_analysis && gpu_indexers == 0;
  const uint64_t shared_first = options.stem_cache_tokens
                                    ? options.stem_cache_tokens
                                    : std::bit_floor(std::clamp<uint64_t>(shared_most, 1u << 12, shared_cap));
  SharedStemCache shared_stems(shared_first, shared_grows ? shared_most : 0);
  // With the GPU's analysis, a parser holds its chunk's text again (pinned), 8 bytes a token (offset
  // and stem id) and 12 a posting of the chunk's inversion: about 5 chunks more.
  // (The GPU analysis: five chunks of staging a parser, and the slice its runs come back through.)
  // Parsers that index their own chunks on the CPU hand each other the postings of the shared stems
  // they own (posting_router.hpp): a parser holds up to kHandOverPostings (and a document's more)
  // before it hands them over, the inboxes two of those a parser (and one more each from senders
  // that handed over before they saw the bound), and emptied buffers keep their capacity: four
  // hand-overs a parser.
  const bool route = own_takes_all && parsers > 1 && !options.gpu_analysis && options.route_postings;
  const uint64_t routing_bytes = route ? 4 * parsers * kHandOverPostings * sizeof(RoutedPosting) : 0;
  const uint64_t in_flight =
      ((pieces_flow ? 9 : 3) + (options.gpu_analysis ? 5 : 0)) * parsers * chunk_bytes + routing_bytes +
      (options.gpu_analysis ? parsers * GpuAnalyzer::kRunFetch * sizeof(Posting) : 0) +
      parsers * own_stem_cache * Analyzer::kStemCacheEntryBytes + shared_stems.first_segment_bytes();
  report.chunk_bytes = chunk_bytes;

  const std::vector<std::string> files = expand_input_paths(inputs);
  uint64_t total_file_bytes = 0;
  for (const std::string& file : files) total_file_bytes += fs::file_size(file);
  // By default sixteen splits per parser over the input, 1–64 MiB each: small enough that the
  // parsers finish together (four a parser left a tail of one split's time: 5% at 16 threads).
  const uint64_t split_bytes = options.split_bytes
                                   ? options.split_bytes
                                   : std::clamp<uint64_t>(total_file_bytes / (16 * parsers), 1u << 20, 64u << 20);
  const std::vector<InputSplit> splits = plan_splits(files, split_bytes);
  report.splits = splits.size();

  if (fs::exists(fs::path(out_dir) / kManifestName))
    throw Error("index " + out_dir + " already exists; refusing to overwrite it");
  const std::string spill_dir = options.spill_dir.empty()
                                    ? (fs::temp_directory_path() / ("warp-runs-" + std::to_string(::getpid()))).string()
                                    : options.spill_dir;
  fs::create_directories(spill_dir);
  std::vector<std::string> created;  // partition directories, removed if the build fails
  const auto clean_up = [&] {
    std::error_code ignored;
    fs::remove_all(spill_dir, ignored);
    for (const std::string& dir : created) fs::remove_all(dir, ignored);
  };
  try {
    DocTable docs(spill_dir + "/documents");
    // The GPU's token table and every parser's analyzer for the parsers' analysis: the CUDA context
    // is made (a few hundred ms), then the analyzers' streams, pinned and device buffers and kernels
    // are set up one after another on this thread, beside the parsers, which analyze their first
    // chunks on the CPU; each parser takes its analyzer as soon as that one is ready. (Made by the
    // parsers themselves, the allocations and first launches had queued on the driver's and the
    // kernel's locks: 16 threads ran at half speed for 0.3 s of a 3 s build. The last is ready
    // ~0.2 s after the first; four threads making them were no sooner: the driver serializes them.)
    // An analyzer that cannot be made is a GPU failure; no GPU at all fails the build.
    struct GpuStart {
      std::shared_ptr<GpuTokenTable> table;
      std::vector<std::unique_ptr<GpuAnalyzer>> analyzers;  // by parser; taken by each
      std::vector<std::string> failures;                    // by parser: why its analyzer is missing
      std::unique_ptr<std::atomic<bool>[]> ready;           // by parser: its analyzer (or failure) is set
      std::atomic<bool> table_failed{false};
      std::vector<double> ready_seconds;  // by parser: when its analyzer was ready, into the build
    } gpu_setup;
    gpu_setup.ready_seconds.resize(parsers);
    gpu_setup.analyzers.resize(parsers);
    gpu_setup.failures.resize(parsers);
    gpu_setup.ready = std::make_unique<std::atomic<bool>[]>(parsers);
    // Too little input a parser for the GPU to repay its start-up: the CPU analyzes everything,
    // but a usable GPU is still required (the build fails without one, as it would have).
    const uint64_t bytes_per_parser = total_file_bytes / std::max<size_t>(parsers, 1);
    const bool gpu_unused = options.gpu_analysis && (bytes_per_parser < options.gpu_analysis_min_bytes ||
                                                     options.memory_budget < options.gpu_analysis_min_budget);
    report.gpu_analysis_unused = gpu_unused;
    // The CUDA driver's own host memory where the GPU analysis runs (context, module images, its
    // pools): measured ~185 MiB on the H100 host (2 GiB at a 512 MiB budget peaked at 820 MiB,
    // against the CPU build's 635, before it was counted here).
    const uint64_t gpu_runtime = options.gpu_analysis && !gpu_unused ? uint64_t{192} << 20 : 0;
    // Where the device inverts the chunks, each parser's run on it is sized with its analyzer, beside
    // the parsers (on a parser's thread its allocations had waited on the driver with the others'
    // set-up): as ParserIndexer::device_run_room() sizes it from the share at the start.
    // An indexer's share: nine tenths of the budget (heap overheads) less what is in flight, the
    // CUDA driver's, the per-document arrays and the parsers' arrays by stem id (`used`).
    const auto share_besides = [&](uint64_t used) -> uint64_t {
      used += in_flight + gpu_runtime;
      const uint64_t usable = budget / 10 * 9;
      return std::max<uint64_t>(usable > used ? (usable - used) / (cpu_indexers + gpu_indexers) : 0, 64u << 10);
    };
    const size_t device_run_postings =
        own_takes_all ? ParserIndexer::device_run_room(share_besides(0)) + chunk_bytes / 2 : 0;
    report.gpu_analysis_bytes_per_parser = bytes_per_parser;
    std::shared_future<void> gpu_start;
    if (options.gpu_analysis) {
      gpu_start =
          std::async(std::launch::async, [&, tokens = shared_stems.capacity()] {
            if (gpu_unused) {
              std::string why;
              const bool usable = gpu_analysis_available(options.gpu_device, &why);
              gpu_setup.table_failed = !usable;
              for (size_t t = 0; t < parsers; ++t) gpu_setup.ready[t].store(true, std::memory_order_release);
              if (!usable) throw Error("no GPU analysis: " + why);
              return;
            }
            try {
              gpu_setup.table = std::make_shared<GpuTokenTable>(options.gpu_device, tokens);
            } catch (...) {
              gpu_setup.table_failed = true;
              for (size_t t = 0; t < parsers; ++t) gpu_setup.ready[t].store(true, std::memory_order_release);
              throw;
            }
            const auto set_up = [&](size_t t) {
              try {
                auto analyzer = std::make_unique<GpuAnalyzer>(*gpu_setup.table, options.build.analyzer.max_token_bytes);
                analyzer->reserve(chunk_bytes + chunk_bytes / 4);
                analyzer->warm_up();
                if (device_run_postings > 0) {
                  try {
                    analyzer->reserve_run(device_run_postings, tokens, parsers);
                  } catch (const std::exception&) {  // no room on the device: the host's lists take its postings
                  }
                }
                gpu_setup.analyzers[t] = std::move(analyzer);
              } catch (const std::exception& e) {
                gpu_setup.failures[t] = e.what();
              }
              gpu_setup.ready_seconds[t] = seconds_since(start);
              gpu_setup.ready[t].store(true, std::memory_order_release);
            };
            for (size_t t = 0; t < parsers; ++t) set_up(t);
          }).share();
    }
    std::atomic<uint64_t> gpu_documents{0}, gpu_cpu_documents{0}, gpu_early_documents{0}, gpu_misses{0},
        gpu_tokens_taken{0}, gpu_run_postings{0};
    std::atomic<double> gpu_analysis_seconds{0};
    // A GPU that fails during the build (a CUDA error, out of memory) leaves the rest of the
    // analysis to the CPU: every parser drops it, the first failure's reason is reported.
    std::atomic<bool> gpu_failed{false};
    std::mutex gpu_failure_mutex;
    std::string gpu_failure;
    // Collections to indexers by a sample's token counts (no sample when one slot takes them all);
    // with GPU indexers the sample also measures how much faster a GPU indexer is, and it takes
    // that many times a CPU indexer's share.
    std::vector<double> speed(slots, 1.0);
    if (parsers_index) speed[0] = static_cast<double>(parsers);
    const GpuIndexerOptions gpu{options.gpu_device, options.gpu_hash_bits};
    std::vector<uint64_t> sampled;
    if (gpu_indexers > 0) {
      // The GPU's context is made (a few hundred ms) while the sample is read.
      auto probe = std::async(std::launch::async, [&] {
        return make_gpu_indexer({900001, spill_dir, [] { return ~uint64_t{0}; }, nullptr}, gpu);
      });
      Piece sample;
      sampled = sample_tokens(splits, chunk_bytes, options.build.analyzer, &sample);
      const std::unique_ptr<Indexer> gpu_indexer = probe.get();
      report.gpu_speed = options.gpu_speed > 0 ? options.gpu_speed : measure_gpu_speed(sample, spill_dir, *gpu_indexer);
      std::fill(speed.begin() + static_cast<std::ptrdiff_t>(cpu_slots), speed.end(), report.gpu_speed);
    } else if (slots > 1) {
      sampled = sample_tokens(splits, chunk_bytes, options.build.analyzer);
    }
    const std::vector<uint32_t> owner =
        slots > 1 ? assign_collections(sampled, speed) : std::vector<uint32_t>(kTrieCollections, 0);

    std::atomic<uint64_t> runs_written{0}, bytes_read{0};
    std::atomic<bool> failed{false};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    const auto record_failure = [&] {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      failed = true;
    };
    // An indexer's share, as the documents, the shared stems and the stem cache's segments grow.
    const auto share = [&]() -> uint64_t {
      return share_besides(docs.memory_bytes() + stem_array_bytes * shared_stems.stems() +
                           (shared_stems.memory_bytes() - shared_stems.first_segment_bytes()));
    };
    // Indexers with threads of their own, each behind a queue (none for the parsers' own slot).
    std::vector<std::unique_ptr<BoundedQueue<Piece>>> pieces;
    std::vector<std::unique_ptr<Indexer>> indexer_state;
    for (size_t i = 0; i < slots; ++i) {
      pieces.push_back(std::make_unique<BoundedQueue<Piece>>(parsers));
      const IndexerContext context{i, spill_dir, share, &runs_written};
      if (i < cpu_slots) {
        indexer_state.push_back(parsers_index ? nullptr : make_cpu_indexer(context));
      } else {
        indexer_state.push_back(make_gpu_indexer(context, gpu));
      }
    }
    // The parsers' own indexers' runs, by parser: parser t reads the t-th range of splits front to
    // back, so taken parser by parser, each parser's in the order it wrote them, the runs are in
    // docID order but for the splits taken from another parser's range at the end.
    std::vector<std::vector<RunInfo>> parser_runs(parsers);
    std::vector<std::thread> indexer_threads, parser_threads;
    for (size_t i = parsers_index ? 1 : 0; i < slots; ++i) {
      indexer_threads.emplace_back([&, i] {
        try {
          while (auto piece = pieces[i]->pop()) indexer_state[i]->consume(*piece);
          indexer_state[i]->spill();
        } catch (...) {
          record_failure();
          while (pieces[i]->pop()) {  // keep draining so parsers never block forever
          }
        }
      });
    }
    std::vector<uint64_t> split_bytes;
    for (const InputSplit& split : splits) {
      const uint64_t end =
          split.end != UINT64_MAX ? split.end : std::max<uint64_t>(fs::file_size(split.path), split.begin);
      split_bytes.push_back(end - split.begin);
    }
    SplitTaker split_taker(split_bytes, parsers);
    std::unique_ptr<PostingRouter> router =
        route ? std::make_unique<PostingRouter>(parsers, 2 * parsers * kHandOverPostings) : nullptr;
    std::atomic<size_t> parsers_running{parsers};
    std::mutex done_mutex;
    std::condition_variable done;
    for (size_t t = 0; t < parsers; ++t) {
      parser_threads.emplace_back([&, t] {
        try {
          const std::unique_ptr<ParserIndexer> own =
              parsers_index ? make_parser_indexer({slots + t, spill_dir, share, &runs_written}) : nullptr;
          Analyzer analyzer(options.build.analyzer);
          analyzer.limit_stem_cache(own_stem_cache);
          analyzer.share_stem_cache(&shared_stems);
          // A document's terms as stem ids, counted in a dense array (ids are small and reused across
          // documents); each stem's trie collection worked out once while the cache holds it.
          std::vector<uint32_t> stems, count, touched, collection_of, own_stems, freqs;
          std::vector<SourceDocument> chunk;
          std::vector<uint32_t> lengths, distinct;
          uint64_t epoch = analyzer.stem_cache_epoch();
          bool gpu_taken = false;
          std::unique_ptr<GpuAnalyzer> gpu;
          std::unique_ptr<GpuRun> gpu_run;  // the indexer's run kept on `gpu`, where it has room
          std::string folded;
          std::vector<uint8_t> on_device;  // per document of the chunk: its shared stems inverted on the device
          uint64_t on_gpu = 0, on_cpu = 0, early = 0, misses = 0, tokens_taken = 0, gpu_chunks = 0;
          const auto drop_gpu = [&](const char* why) {
            if (why != nullptr && !gpu_failed.exchange(true)) {
              std::lock_guard<std::mutex> lock(gpu_failure_mutex);
              gpu_failure = why;
            }
            if (gpu_run != nullptr) {  // what the device held is filed on the host
              own->set_run_on_device(nullptr);
              gpu_run.reset();
            }
            if (gpu != nullptr) gpu_analysis_seconds.fetch_add(gpu->gpu_seconds());
            gpu.reset();
          };
          // A failed device's run on the CPU: its chunks read and analyzed again (the GPU's stems are
          // the CPU analyzer's), their shared stems' postings to `sink`.
          const auto replay_chunks = [&](const std::vector<GpuRun::Chunk>& kept, const RunOnDevice::Sink& sink) {
            std::unique_ptr<SplitReader> reader;
            size_t reader_split = 0;
            uint64_t position = 0;
            SourceDocument doc;
            std::vector<uint32_t> ids, counts, seen;
            for (const GpuRun::Chunk& k : kept) {
              if (reader == nullptr || reader_split != k.split || position > k.first) {
                reader = std::make_unique<SplitReader>(splits[k.split]);
                reader_split = k.split, position = 0;
              }
              for (; position < k.first + k.on_device.size(); ++position) {
                if (!reader->next(doc)) throw Error("input " + splits[k.split].path + " changed during the build");
                const size_t d = position - k.first;
                if (position < k.first || !k.on_device[d]) continue;
                analyzer.trim_stem_cache();
                ids.clear();
                analyzer.analyze_stems(doc.title, ids);
                analyzer.analyze_stems(doc.body, ids);
                const uint32_t shared = static_cast<uint32_t>(analyzer.stable_stems());
                if (counts.size() < shared) counts.resize(shared, 0);
                seen.clear();
                for (uint32_t id : ids) {
                  if (id < shared && counts[id]++ == 0) seen.push_back(id);
                }
                for (uint32_t id : seen) sink(id, k.base + static_cast<DocId>(d), std::exchange(counts[id], 0));
              }
            }
          };
          // Postings other parsers routed to this one, between its own documents; its indexer may
          // spill after each buffer of them.
          const PostingRouter::Sink take_routed = [&](size_t from, std::span<const RoutedPosting> postings) {
            own->add_routed(analyzer, from, postings);
            own->end_chunk();
          };
          if (router != nullptr) own->set_routing(parsers, t);
          // The indexer's end of chunk, which may spill; a device that failed in the spill is dropped.
          const auto end_chunk = [&] {
            own->end_chunk();
            if (gpu_run != nullptr && !own->device_failure().empty()) drop_gpu(own->device_failure().c_str());
          };
          // A chunk's shared stems indexed on the CPU from its tokens' ids (still the GPU analyzer's),
          // where the device's inversion of them failed.
          const auto index_on_cpu = [&](DocId base, size_t documents, const std::vector<uint8_t>& device_docs,
                                        std::vector<uint32_t>& chunk_distinct) {
            if (count.size() < analyzer.stem_count()) count.resize(analyzer.stem_count(), 0);
            const uint32_t* starts = gpu->token_starts();
            const uint32_t* values = gpu->token_values();
            uint32_t t = 0;
            for (size_t d = 0; d < documents; ++d) {
              stems.clear();
              for (const uint32_t end = gpu->doc_begin(d + 1); t < gpu->tokens() && starts[t] < end; ++t) {
                if (device_docs[d] && values[t] < GpuAnalyzer::kDropped) stems.push_back(values[t]);
              }
              touched.clear(), freqs.clear();
              for (uint32_t id : stems) {
                if (count[id]++ == 0) touched.push_back(id);
              }
              for (uint32_t id : touched) freqs.push_back(std::exchange(count[id], 0));
              if (!touched.empty()) own->add_document(analyzer, base + static_cast<DocId>(d), touched, freqs);
              chunk_distinct[d] += static_cast<uint32_t>(touched.size());
            }
          };
          // The chunk whose shared stems the device is inverting, while the parser reads the next.
          struct Inverting {
            bool pending = false;
            DocId base = 0;
            size_t documents = 0;
            size_t split = 0;
            uint64_t first = 0;  // documents of the split before this chunk's
          } inverting;
          std::vector<uint32_t> inverting_lengths, inverting_distinct;
          std::vector<uint8_t> inverting_on_device;
          // Its postings to the parser's indexer, then its counts and the indexer's end of chunk.
          const auto finish_inversion = [&] {
            if (!inverting.pending) return;
            inverting.pending = false;
            std::string why;
            try {
              gpu->finish_invert();
              if (options.gpu_analysis_fail_after > 0 && gpu_chunks == options.gpu_analysis_fail_after + 1) {
                throw Error("a GPU failure simulated by a test");
              }
            } catch (const std::exception& e) {
              why = e.what();
            }
            if (why.empty()) {
              bool kept = false;  // on the device too, for the indexer's spill
              try {
                kept = gpu_run != nullptr && gpu->append_to_run(static_cast<uint32_t>(inverting.base));
              } catch (const std::exception& e) {
                why = e.what();
              }
              if (kept) {
                gpu_run->chunks.push_back({inverting.split, inverting.first, inverting.base, inverting_on_device});
                own->add_device_postings(analyzer, inverting.base, gpu->posting_keys(), gpu->posting_freqs(),
                                         gpu->postings());
              } else {
                own->add_sorted_postings(analyzer, inverting.base, gpu->posting_keys(), gpu->posting_freqs(),
                                         gpu->postings());
              }
              for (size_t d = 0; d < inverting.documents; ++d) {
                inverting_distinct[d] += inverting_on_device[d] ? gpu->doc_distinct()[d] : 0;
              }
              if (!why.empty()) drop_gpu(why.c_str());
            } else {  // the CPU indexes the shared stems the device was to
              index_on_cpu(inverting.base, inverting.documents, inverting_on_device, inverting_distinct);
              drop_gpu(why.c_str());
            }
            docs.set_counts(inverting.base, inverting_lengths, inverting_distinct);
            end_chunk();
          };
          for (std::optional<size_t> next; !failed && (next = split_taker.next(t));) {
            const size_t s = *next;
            SplitReader reader(splits[s]);
            uint64_t split_documents = 0;  // read before this chunk
            for (uint32_t seq = 0; !failed; ++seq) {
              chunk.clear();
              uint64_t text = 0;
              const uint64_t before = reader.bytes_read();
              SourceDocument doc;
              while (text < chunk_bytes && reader.next(doc)) {
                text += doc.body.size() + doc.title.size() + doc.external_id.size() + doc.url.size();
                chunk.push_back(std::move(doc));
              }
              bytes_read += reader.bytes_read() - before;
              const uint64_t chunk_first = split_documents;
              split_documents += chunk.size();
              finish_inversion();  // the last chunk's, overlapped with reading this one
              if (chunk.empty()) break;
              if (gpu_failed) drop_gpu(nullptr);
              if (options.gpu_analysis && !gpu_taken && !gpu_failed) {
                if (options.gpu_analysis_from_start) {
                  while (!gpu_setup.ready[t].load(std::memory_order_acquire))
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
                if (gpu_setup.ready[t].load(std::memory_order_acquire)) {
                  if (gpu_setup.table_failed)
                    std::shared_future<void>(gpu_start).get();  // no GPU at all: the build fails with the reason
                  gpu_taken = true;
                  if (!gpu_unused) {
                    gpu = std::move(gpu_setup.analyzers[t]);
                    if (gpu == nullptr) drop_gpu(gpu_setup.failures[t].c_str());
                  }
                  if (gpu != nullptr && own_takes_all && gpu->run_capacity() > 0) {  // its run on the device
                    gpu_run = std::make_unique<GpuRun>(*gpu, replay_chunks, options.gpu_analysis_fail_run_step);
                    own->set_run_on_device(gpu_run.get());
                  }
                }
                if (!gpu_taken && !gpu_unused) early += chunk.size();
              }
              try {
                if (gpu != nullptr) {
                  if (!own_takes_all && options.gpu_analysis_fail_after > 0 &&
                      gpu_chunks == options.gpu_analysis_fail_after) {
                    throw Error("a GPU failure simulated by a test");
                  }
                  gpu->begin_chunk();
                  for (const SourceDocument& d : chunk) gpu->add_document(d.title, d.body);
                  gpu->start();
                  ++gpu_chunks;
                }
              } catch (const std::exception& e) {
                drop_gpu(e.what());
              }
              const DocId base = docs.add_chunk(s, seq, chunk);  // while the GPU analyzes the chunk
              try {
                if (gpu != nullptr) {
                  gpu->finish();
                  tokens_taken += gpu->tokens();
                }
              } catch (const std::exception& e) {
                drop_gpu(e.what());
              }
              uint32_t next_token = 0;
              // Where the parser's own indexer takes every collection, the device inverts the
              // chunk's shared stems too (GpuAnalyzer::invert): the loop below indexes only the
              // analyzer's own stems and the documents outside ASCII.
              const bool device_inverts = gpu != nullptr && own_takes_all;
              on_device.clear();
              std::vector<Piece> out(slots);
              lengths.clear(), distinct.clear();
              for (size_t d = 0; d < chunk.size(); ++d) {
                analyzer.trim_stem_cache();
                if (analyzer.stem_cache_epoch() != epoch) {  // the own cache was emptied: its ids name other stems now
                  collection_of.resize(std::min<size_t>(collection_of.size(), analyzer.stable_stems()));
                  epoch = analyzer.stem_cache_epoch();
                }
                stems.clear();
                uint32_t length = 0;
                const bool by_gpu =
                    device_inverts
                        ? take_document_tokens(*gpu, d, next_token, analyzer, stems, length, folded, misses)
                        : gpu != nullptr && take_document_stems(*gpu, d, next_token, analyzer, stems, folded, misses);
                if (by_gpu) {
                  ++on_gpu;
                } else {
                  if (gpu != nullptr) ++on_cpu;
                  analyzer.analyze_stems(chunk[d].title, stems);
                  analyzer.analyze_stems(chunk[d].body, stems);
                }
                if (!(device_inverts && by_gpu)) length = static_cast<uint32_t>(stems.size());
                if (device_inverts) on_device.push_back(by_gpu);
                if (count.size() < analyzer.stem_count()) count.resize(analyzer.stem_count(), 0);
                if (!own_takes_all) collection_of.resize(analyzer.stem_count(), kNoCollection);
                touched.clear();
                for (uint32_t id : stems) {
                  if (count[id]++ == 0) touched.push_back(id);
                }
                lengths.push_back(length);
                distinct.push_back(static_cast<uint32_t>(touched.size()));
                const DocId doc = base + static_cast<DocId>(d);
                if (own_takes_all) {  // the parser's own indexer takes every collection
                  if (touched.empty()) continue;
                  freqs.clear();
                  if (router != nullptr) {  // the shared stems other parsers own go to them
                    const size_t stable = analyzer.stable_stems();
                    size_t kept = 0;
                    for (const uint32_t id : touched) {
                      const uint32_t freq = std::exchange(count[id], 0);
                      if (id < stable && router->owner(id) != t) {
                        router->add(t, id, doc, freq);
                        continue;
                      }
                      touched[kept++] = id;
                      freqs.push_back(freq);
                    }
                    touched.resize(kept);
                    if (!touched.empty()) own->add_document(analyzer, doc, touched, freqs);
                    if (router->held(t) >= kHandOverPostings) router->hand_over(t, take_routed, failed);
                    continue;
                  }
                  for (uint32_t id : touched) freqs.push_back(std::exchange(count[id], 0));
                  own->add_document(analyzer, doc, touched, freqs);
                  continue;
                }
                own_stems.clear(), freqs.clear();
                for (uint32_t id : touched) {
                  if (collection_of[id] == kNoCollection) collection_of[id] = trie_collection(analyzer.stem(id));
                  const uint32_t collection = collection_of[id];
                  if (parsers_index && owner[collection] == 0) {  // the parser's own indexer's share
                    own_stems.push_back(id);
                    freqs.push_back(std::exchange(count[id], 0));
                    continue;
                  }
                  const std::string_view suffix = trie_suffix(analyzer.stem(id), collection);
                  Piece& piece = out[owner[collection]];
                  piece.entries.push_back({collection, static_cast<uint32_t>(piece.suffixes.size()),
                                           static_cast<uint32_t>(suffix.size()), doc, count[id]});
                  piece.suffixes.append(suffix);
                  count[id] = 0;
                }
                if (!own_stems.empty()) own->add_document(analyzer, doc, own_stems, freqs);
              }
              const size_t chunk_documents = chunk.size();
              chunk.clear();
              if (device_inverts) {
                // The device inverts the chunk while this parser reads its next one; the postings,
                // the chunk's counts and the indexer's end of chunk follow then (finish_inversion).
                try {
                  gpu->start_invert(static_cast<uint32_t>(analyzer.shared_stem_capacity()));
                  inverting = {true, base, chunk_documents, s, chunk_first};
                  std::swap(inverting_lengths, lengths), std::swap(inverting_distinct, distinct),
                      std::swap(inverting_on_device, on_device);
                } catch (const std::exception& e) {
                  index_on_cpu(base, chunk_documents, on_device, distinct);
                  drop_gpu(e.what());
                }
              }
              if (!inverting.pending) {
                docs.set_counts(base, lengths, distinct);
                if (router != nullptr) router->hand_over(t, take_routed, failed);
                if (own != nullptr) end_chunk();
              }
              for (size_t i = 0; i < slots; ++i) {
                if (!out[i].entries.empty()) pieces[i]->push(std::move(out[i]));
              }
            }
            docs.end_split(s, reader.lines(), std::move(reader.rejections()), reader.rejected());
          }
          if (!failed) finish_inversion();
          // What it holds to the owners, then the others' postings until all have finished (a
          // parser that fails stops the build: nobody waits for it).
          if (router != nullptr) router->finish(t, take_routed, failed);
          gpu_documents += on_gpu, gpu_cpu_documents += on_cpu, gpu_early_documents += early, gpu_misses += misses;
          gpu_tokens_taken += tokens_taken;
          if (own != nullptr && !failed) own->spill();  // with the run the device holds, before it goes
          drop_gpu(gpu_run != nullptr && !own->device_failure().empty() ? own->device_failure().c_str() : nullptr);
          if (own != nullptr && !failed) {
            parser_runs[t] = std::move(own->runs());
            gpu_run_postings += own->device_postings_written();
          }
        } catch (...) {  // an unreadable input: stop everything cleanly, then report it
          record_failure();
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
          on_progress({docs.documents(), bytes_read.load(), total_file_bytes, runs_written.load()});
        }
      }
    }
    for (auto& t : parser_threads) t.join();
    for (auto& queue : pieces) queue->close();
    for (auto& t : indexer_threads) t.join();
    if (failure) std::rethrow_exception(failure);
    if (options.gpu_analysis) gpu_start.get();  // a GPU that failed to start fails the build, with its reason
    std::vector<RunInfo> runs;
    for (std::vector<RunInfo>& of_parser : parser_runs) {
      for (RunInfo& run : of_parser) runs.push_back(std::move(run));
    }
    for (auto& indexer : indexer_state) {
      if (indexer == nullptr) continue;
      for (RunInfo& run : indexer->runs()) runs.push_back(std::move(run));
      report.gpu_seconds += indexer->gpu_seconds();
      report.gpu_fallbacks += indexer->cpu_fallbacks();
    }
    indexer_state.clear();
    pieces.clear();
    ::malloc_trim(0);  // the parse phase's freed heap back to the system before the back end
    report.runs_written = runs_written;
    report.runs_merged = runs.size();
    report.gpu_analysis_documents = gpu_documents;
    report.gpu_analysis_cpu_documents = gpu_cpu_documents;
    report.gpu_analysis_early_documents = gpu_early_documents;
    if (options.gpu_analysis && !gpu_unused) {
      report.gpu_analysis_ready_first =
          *std::min_element(gpu_setup.ready_seconds.begin(), gpu_setup.ready_seconds.end());
      report.gpu_analysis_ready_last =
          *std::max_element(gpu_setup.ready_seconds.begin(), gpu_setup.ready_seconds.end());
    }
    report.gpu_analysis_failure = gpu_failure;
    report.gpu_analysis_tokens = gpu_tokens_taken;
    report.gpu_analysis_run_postings = gpu_run_postings;
    report.gpu_analysis_misses = gpu_misses;
    report.gpu_analysis_seconds = gpu_analysis_seconds;
    read.bytes = bytes_read;
    const auto parsed = Clock::now();
    report.parse_seconds = seconds_since(start);
    report.routed_postings = router != nullptr ? router->routed() : 0;
    router.reset();
    report.stem_cache_segments = shared_stems.segments();
    report.stem_cache_stems = shared_stems.stems();
    report.stem_cache_frozen = shared_stems.frozen();

    // The final docIDs (duplicates resolved) on one thread while the others prepare the back end,
    // which needs only the runs and the directories: its term ranges and the partitions'
    // databases. One after the other they had been the build's serial gap between its phases.
    std::future<void> finishing = std::async(std::launch::async, [&] { docs.finish(splits, read, threads); });
    const uint32_t parts = options.build.partitions;
    std::vector<std::string> partition_dirs;
    for (uint32_t p = 0; p < parts; ++p) {
      partition_dirs.push_back((fs::path(out_dir) / partition_dir_name(p)).string());
      if (fs::exists(partition_dirs.back()))
        throw Error("partition " + partition_dirs.back() + " already exists; refusing to overwrite it");
      fs::create_directories(partition_dirs.back());
      created.push_back(partition_dirs.back());
    }
    // Term ranges (two per thread, for balance) and the documents of each partition, in parallel.
    const std::vector<std::string> range_bounds = term_ranges(runs, 2 * threads);
    const size_t ranges = range_bounds.size() + 1;
    rlimit files{};
    const uint64_t open_files =
        ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY ? files.rlim_cur : 1u << 20;
    const uint64_t run_count = std::max<size_t>(runs.size(), 1);
    const size_t merge_threads = merge_concurrency(budget, run_count, threads, open_files);
    const size_t buffer_bytes =
        std::clamp<uint64_t>(budget / (4 * merge_threads * run_count), kMinMergeBuffer, 1u << 20);
    std::vector<RangeOutput> range_outputs(ranges);
    std::vector<SstRows::Done> documents(parts);
    std::vector<std::unique_ptr<PartitionAssembly>> assemblies;  // closed before a failed build's clean-up
    // Movers: a partition's share of the back-end threads, beside them (they wait on RocksDB about as
    // much as they work); with fewer threads than partitions, the threads move their ranges in.
    const size_t movers = merge_threads / parts;
    // The partitions' databases created side by side: each open writes and syncs its first files, and
    // one after another they had kept every back-end thread waiting (62-84 ms for 4 partitions on
    // the development VM, 25-38 side by side).
    assemblies.resize(parts);
    run_parallel_tasks(parts, threads, [&](size_t p) {
      assemblies[p] = std::make_unique<PartitionAssembly>(partition_dirs[p], movers);
    });
    finishing.get();  // rethrows what finish() threw
    report.documents = docs.kept();
    const std::vector<DocId> span_starts = split_taker.span_starts(docs.split_starts());
    report.merge_seconds = seconds_since(parsed);
    if (docs.kept() == 0) {
      assemblies.clear();  // closed before their directories go
      clean_up();
      return report;
    }

    // The partitions: boundaries balanced by postings, collection statistics, one encoder each.
    const auto encode_start = Clock::now();
    const std::vector<DocId> bounds = balanced_boundaries(docs.distinct(), parts);
    uint64_t total_length = 0;
    for (uint32_t length : docs.lengths()) total_length += length;
    const CollectionStats stats{docs.kept(), total_length};
    std::vector<PartitionEncoder> encoders;
    for (uint32_t p = 0; p < parts; ++p) {
      const PartitionMeta meta = partition_meta(options.build, p, bounds, stats);
      encoders.emplace_back(meta,
                            std::span<const uint32_t>(docs.lengths()).subspan(bounds[p], bounds[p + 1] - bounds[p]));
    }
    // The partitions' documents first: each is one long task (a pass over its part of the spill),
    // which last had left the other threads idle at the end of the phase.
    run_parallel_tasks(parts + ranges, merge_threads, [&](size_t task) {
      if (task >= parts) {
        task -= parts;
        const std::string lo = task == 0 ? std::string() : range_bounds[task - 1];
        const std::string* hi = task + 1 < ranges ? &range_bounds[task] : nullptr;
        range_outputs[task] =
            merge_range(runs, lo, hi, buffer_bytes, docs, span_starts, encoders, partition_dirs, task);
        // To the partitions' movers (long lists to blob files) while this thread encodes the next range.
        for (uint32_t p = 0; p < parts; ++p)
          assemblies[p]->add_terms(range_outputs[task].lexicon[p], range_outputs[task].postings[p]);
        return;
      }
      const uint32_t p = static_cast<uint32_t>(task);
      SstRows rows(SstRows::Family::kDocuments, partition_dirs[p] + "/ingest-documents.sst");
      docs.for_each_document(bounds[p], bounds[p + 1],
                             [&](DocId doc, const DocumentRecord& record) { rows.put_document(doc, record); });
      documents[p] = rows.finish();
    });
    report.encode_seconds = seconds_since(encode_start);

    const auto write_start = Clock::now();
    report.partitions.resize(parts);
    run_parallel_tasks(parts, threads, [&](size_t p) {
      BuiltSummary& summary = report.partitions[p];
      summary.meta = encoders[p].meta();
      std::vector<SstRows::Done> lexicon;
      for (const RangeOutput& range : range_outputs) {
        lexicon.push_back(range.lexicon[p]);
        summary.terms += range.terms[p];
        summary.meta.posting_count += range.posting_count[p];
        summary.list_bytes += range.list_bytes[p];
      }
      const std::vector<uint32_t> lengths(docs.lengths().begin() + bounds[p], docs.lengths().begin() + bounds[p + 1]);
      assemblies[p]->finish(summary.meta, summary.terms, lengths, lexicon, {documents[p]});
      assemblies[p].reset();
    });
    std::vector<ManifestPartition> manifest;
    for (const BuiltSummary& summary : report.partitions) manifest.push_back({summary.meta, summary.terms});
    write_manifest(out_dir, manifest);
    report.write_seconds = seconds_since(write_start);
    docs.remove_spill();
  } catch (...) {
    clean_up();
    throw;
  }
  std::error_code ignored;
  fs::remove_all(spill_dir, ignored);
  return report;
}

}  // namespace warp::pipeline
