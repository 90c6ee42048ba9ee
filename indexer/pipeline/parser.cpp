#include "indexer/pipeline/parser.hpp"

#include <cstddef>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <utility>

#include "common/util/status.hpp"
#include "indexer/postings/trie_collections.hpp"

namespace warp::pipeline {

void ParseShared::record_failure() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!failure) failure = std::current_exception();
  failed = true;
}

void ParseShared::record_gpu_failure(const char* why) {
  if (gpu_failed.exchange(true)) return;
  std::lock_guard<std::mutex> lock(mutex);
  gpu_failure = why;
}

namespace {

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

class Parser {
 public:
  Parser(ParseShared& shared, size_t index);
  void run();

 private:
  bool read_chunk(SplitReader& reader);
  void take_gpu();
  void start_gpu_analysis();
  void analyze_chunk(DocId base, std::vector<Piece>& out);
  void index_own(DocId doc);
  void index_into_pieces(DocId doc, std::vector<Piece>& out);
  void end_chunk_of_split(DocId base, size_t split, uint64_t chunk_first, std::vector<Piece>& out);
  void finish_inversion();
  void index_on_cpu(DocId base, size_t documents, const std::vector<uint8_t>& device_docs,
                    std::vector<uint32_t>& chunk_distinct);
  void replay_chunks(const std::vector<GpuRun::Chunk>& kept, const RunOnDevice::Sink& sink);
  void end_chunk();
  void drop_gpu(const char* why);
  void finish();

  ParseShared& shared_;
  const BuildPlan& plan_;
  const PipelineOptions& options_;
  const size_t index_;
  std::unique_ptr<ParserIndexer> own_;  // where the parsers index their own chunks
  Analyzer analyzer_;
  PostingRouter::Sink take_routed_;
  // A document's terms as stem ids, counted in a dense array (ids are small and reused across
  // documents); each stem's trie collection worked out once while the cache holds it.
  std::vector<uint32_t> stems_, count_, touched_, collection_of_, own_stems_, freqs_;
  std::vector<SourceDocument> chunk_;
  std::vector<uint32_t> lengths_, distinct_;  // the chunk's documents' lengths and distinct stems
  uint64_t epoch_ = 0;
  bool gpu_taken_ = false;
  std::unique_ptr<GpuAnalyzer> gpu_;
  std::unique_ptr<GpuRun> gpu_run_;  // the indexer's run kept on `gpu_`, where it has room
  bool device_inverts_ = false;      // the chunk's shared stems are inverted on the device
  std::string folded_;
  std::vector<uint8_t> on_device_;  // per document of the chunk: its shared stems inverted on the device
  uint64_t on_gpu_ = 0, on_cpu_ = 0, early_ = 0, misses_ = 0, tokens_taken_ = 0, gpu_chunks_ = 0;
  // The chunk whose shared stems the device is inverting, while the parser reads the next.
  struct Inverting {
    bool pending = false;
    DocId base = 0;
    size_t documents = 0;
    size_t split = 0;
    uint64_t first = 0;  // documents of the split before this chunk's
  } inverting_;
  std::vector<uint32_t> inverting_lengths_, inverting_distinct_;
  std::vector<uint8_t> inverting_on_device_;
};

Parser::Parser(ParseShared& shared, size_t index)
    : shared_(shared),
      plan_(shared.plan),
      options_(shared.options),
      index_(index),
      own_(plan_.parsers_index
               ? make_parser_indexer({plan_.slots + index, shared.spill_dir, shared.share, &shared.runs_written})
               : nullptr),
      analyzer_(options_.build.analyzer) {
  analyzer_.limit_stem_cache(plan_.own_stem_cache);
  analyzer_.share_stem_cache(&shared.shared_stems);
  epoch_ = analyzer_.stem_cache_epoch();
  // Postings other parsers routed to this one, between its own documents; its indexer may spill
  // after each buffer of them.
  take_routed_ = [this](size_t from, std::span<const RoutedPosting> postings) {
    own_->add_routed(analyzer_, from, postings);
    own_->end_chunk();
  };
  if (shared.router != nullptr) own_->set_routing(plan_.parsers, index_);
}

void Parser::drop_gpu(const char* why) {
  if (why != nullptr) shared_.record_gpu_failure(why);
  if (gpu_run_ != nullptr) {  // what the device held is filed on the host
    own_->set_run_on_device(nullptr);
    gpu_run_.reset();
  }
  if (gpu_ != nullptr) shared_.gpu_seconds.fetch_add(gpu_->gpu_seconds());
  gpu_.reset();
}

// A failed device's run on the CPU: its chunks read and analyzed again (the GPU's stems are the
// CPU analyzer's), their shared stems' postings to `sink`.
void Parser::replay_chunks(const std::vector<GpuRun::Chunk>& kept, const RunOnDevice::Sink& sink) {
  std::unique_ptr<SplitReader> reader;
  size_t reader_split = 0;
  uint64_t position = 0;
  SourceDocument doc;
  std::vector<uint32_t> ids, counts, seen;
  for (const GpuRun::Chunk& k : kept) {
    if (reader == nullptr || reader_split != k.split || position > k.first) {
      reader = std::make_unique<SplitReader>(plan_.splits[k.split]);
      reader_split = k.split, position = 0;
    }
    for (; position < k.first + k.on_device.size(); ++position) {
      if (!reader->next(doc)) throw Error("input " + plan_.splits[k.split].path + " changed during the build");
      const size_t d = position - k.first;
      if (position < k.first || !k.on_device[d]) continue;
      analyzer_.trim_stem_cache();
      ids.clear();
      analyzer_.analyze_stems(doc.title, ids);
      analyzer_.analyze_stems(doc.body, ids);
      const uint32_t shared = static_cast<uint32_t>(analyzer_.stable_stems());
      if (counts.size() < shared) counts.resize(shared, 0);
      seen.clear();
      for (uint32_t id : ids) {
        if (id < shared && counts[id]++ == 0) seen.push_back(id);
      }
      for (uint32_t id : seen) sink(id, k.base + static_cast<DocId>(d), std::exchange(counts[id], 0));
    }
  }
}

// The indexer's end of chunk, which may spill; a device that failed in the spill is dropped.
void Parser::end_chunk() {
  own_->end_chunk();
  if (gpu_run_ != nullptr && !own_->device_failure().empty()) drop_gpu(own_->device_failure().c_str());
}

// A chunk's shared stems indexed on the CPU from its tokens' ids (still the GPU analyzer's), where
// the device's inversion of them failed.
void Parser::index_on_cpu(DocId base, size_t documents, const std::vector<uint8_t>& device_docs,
                          std::vector<uint32_t>& chunk_distinct) {
  if (count_.size() < analyzer_.stem_count()) count_.resize(analyzer_.stem_count(), 0);
  const uint32_t* starts = gpu_->token_starts();
  const uint32_t* values = gpu_->token_values();
  uint32_t t = 0;
  for (size_t d = 0; d < documents; ++d) {
    stems_.clear();
    for (const uint32_t end = gpu_->doc_begin(d + 1); t < gpu_->tokens() && starts[t] < end; ++t) {
      if (device_docs[d] && values[t] < GpuAnalyzer::kDropped) stems_.push_back(values[t]);
    }
    touched_.clear(), freqs_.clear();
    for (uint32_t id : stems_) {
      if (count_[id]++ == 0) touched_.push_back(id);
    }
    for (uint32_t id : touched_) freqs_.push_back(std::exchange(count_[id], 0));
    if (!touched_.empty()) own_->add_document(analyzer_, base + static_cast<DocId>(d), touched_, freqs_);
    chunk_distinct[d] += static_cast<uint32_t>(touched_.size());
  }
}

// The inverted chunk's postings to the parser's indexer, then its counts and the indexer's end of
// chunk.
void Parser::finish_inversion() {
  if (!inverting_.pending) return;
  inverting_.pending = false;
  std::string why;
  try {
    gpu_->finish_invert();
    if (options_.gpu_analysis_fail_after > 0 && gpu_chunks_ == options_.gpu_analysis_fail_after + 1) {
      throw Error("a GPU failure simulated by a test");
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty()) {
    bool kept = false;  // on the device too, for the indexer's spill
    try {
      kept = gpu_run_ != nullptr && gpu_->append_to_run(static_cast<uint32_t>(inverting_.base));
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (kept) {
      gpu_run_->chunks.push_back({inverting_.split, inverting_.first, inverting_.base, inverting_on_device_});
      own_->add_device_postings(analyzer_, inverting_.base, gpu_->posting_keys(), gpu_->posting_freqs(),
                                gpu_->postings());
    } else {
      own_->add_sorted_postings(analyzer_, inverting_.base, gpu_->posting_keys(), gpu_->posting_freqs(),
                                gpu_->postings());
    }
    for (size_t d = 0; d < inverting_.documents; ++d) {
      inverting_distinct_[d] += inverting_on_device_[d] ? gpu_->doc_distinct()[d] : 0;
    }
    if (!why.empty()) drop_gpu(why.c_str());
  } else {  // the CPU indexes the shared stems the device was to
    index_on_cpu(inverting_.base, inverting_.documents, inverting_on_device_, inverting_distinct_);
    drop_gpu(why.c_str());
  }
  shared_.docs.set_counts(inverting_.base, inverting_lengths_, inverting_distinct_);
  end_chunk();
}

// The next chunk of `reader`'s split into chunk_ (empty at the split's end).
bool Parser::read_chunk(SplitReader& reader) {
  chunk_.clear();
  uint64_t text = 0;
  const uint64_t before = reader.bytes_read();
  SourceDocument doc;
  const auto* excluded = options_.excluded_ids.get();
  while (text < plan_.chunk_bytes && reader.next(doc)) {
    if (excluded != nullptr && excluded->count(doc.external_id) > 0) {
      ++shared_.excluded;
      continue;
    }
    text += doc.body.size() + doc.title.size() + doc.external_id.size() + doc.url.size();
    chunk_.push_back(std::move(doc));
  }
  shared_.bytes_read += reader.bytes_read() - before;
  return !chunk_.empty();
}

// --gpu-analysis: the parser's analyzer, once it is ready (at once in tests that ask for it).
void Parser::take_gpu() {
  if (options_.gpu_analysis_from_start) {
    while (!shared_.gpu_start.ready(index_)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (shared_.gpu_start.ready(index_)) {
    gpu_taken_ = true;
    std::string why;
    gpu_ = shared_.gpu_start.take(index_, why);
    if (gpu_ == nullptr && !why.empty()) drop_gpu(why.c_str());
    if (gpu_ != nullptr && plan_.own_takes_all && gpu_->run_capacity() > 0) {  // its run on the device
      gpu_run_ = std::make_unique<GpuRun>(
          *gpu_,
          [this](const std::vector<GpuRun::Chunk>& kept, const RunOnDevice::Sink& sink) { replay_chunks(kept, sink); },
          options_.gpu_analysis_fail_run_step);
      own_->set_run_on_device(gpu_run_.get());
    }
  }
  if (!gpu_taken_ && !plan_.gpu_unused) early_ += chunk_.size();
}

// The chunk to the GPU analyzer, which tokenizes it while the parser files the documents.
void Parser::start_gpu_analysis() {
  try {
    if (gpu_ != nullptr) {
      if (!plan_.own_takes_all && options_.gpu_analysis_fail_after > 0 &&
          gpu_chunks_ == options_.gpu_analysis_fail_after) {
        throw Error("a GPU failure simulated by a test");
      }
      gpu_->begin_chunk();
      for (const SourceDocument& d : chunk_) gpu_->add_document(d.title, d.body);
      gpu_->start();
      ++gpu_chunks_;
    }
  } catch (const std::exception& e) {
    drop_gpu(e.what());
  }
}

// Every document of the chunk analyzed (its stems taken from the GPU analyzer where it has them)
// and its postings handed on. Where the parser's own indexer takes every collection, the device
// inverts the chunk's shared stems too (GpuAnalyzer::invert): here only the analyzer's own stems
// and the documents outside ASCII are indexed.
void Parser::analyze_chunk(DocId base, std::vector<Piece>& out) {
  uint32_t next_token = 0;
  device_inverts_ = gpu_ != nullptr && plan_.own_takes_all;
  on_device_.clear();
  lengths_.clear(), distinct_.clear();
  for (size_t d = 0; d < chunk_.size(); ++d) {
    analyzer_.trim_stem_cache();
    if (analyzer_.stem_cache_epoch() != epoch_) {  // the own cache was emptied: its ids name other stems now
      collection_of_.resize(std::min<size_t>(collection_of_.size(), analyzer_.stable_stems()));
      epoch_ = analyzer_.stem_cache_epoch();
    }
    stems_.clear();
    uint32_t length = 0;
    const bool by_gpu =
        device_inverts_
            ? take_document_tokens(*gpu_, d, next_token, analyzer_, stems_, length, folded_, misses_)
            : gpu_ != nullptr && take_document_stems(*gpu_, d, next_token, analyzer_, stems_, folded_, misses_);
    if (by_gpu) {
      ++on_gpu_;
    } else {
      if (gpu_ != nullptr) ++on_cpu_;
      analyzer_.analyze_stems(chunk_[d].title, stems_);
      analyzer_.analyze_stems(chunk_[d].body, stems_);
    }
    if (!(device_inverts_ && by_gpu)) length = static_cast<uint32_t>(stems_.size());
    if (device_inverts_) on_device_.push_back(by_gpu);
    if (count_.size() < analyzer_.stem_count()) count_.resize(analyzer_.stem_count(), 0);
    if (!plan_.own_takes_all) collection_of_.resize(analyzer_.stem_count(), kNoCollection);
    touched_.clear();
    for (uint32_t id : stems_) {
      if (count_[id]++ == 0) touched_.push_back(id);
    }
    lengths_.push_back(length);
    distinct_.push_back(static_cast<uint32_t>(touched_.size()));
    const DocId doc = base + static_cast<DocId>(d);
    if (plan_.own_takes_all) {
      index_own(doc);
    } else {
      index_into_pieces(doc, out);
    }
  }
}

// The parser's own indexer takes every collection; with routing, the shared stems other parsers
// own go to them.
void Parser::index_own(DocId doc) {
  if (touched_.empty()) return;
  freqs_.clear();
  PostingRouter* router = shared_.router;
  if (router == nullptr) {
    for (uint32_t id : touched_) freqs_.push_back(std::exchange(count_[id], 0));
    own_->add_document(analyzer_, doc, touched_, freqs_);
    return;
  }
  const size_t stable = analyzer_.stable_stems();
  size_t kept = 0;
  for (const uint32_t id : touched_) {
    const uint32_t freq = std::exchange(count_[id], 0);
    if (id < stable && router->owner(id) != index_) {
      router->add(index_, id, doc, freq);
      continue;
    }
    touched_[kept++] = id;
    freqs_.push_back(freq);
  }
  touched_.resize(kept);
  if (!touched_.empty()) own_->add_document(analyzer_, doc, touched_, freqs_);
  if (router->held(index_) >= kHandOverPostings) router->hand_over(index_, take_routed_, shared_.failed);
}

// Indexers own the collections: the document's postings as pieces for their owners (the parser's
// own indexer keeps the collections of slot 0 where parsers index).
void Parser::index_into_pieces(DocId doc, std::vector<Piece>& out) {
  own_stems_.clear(), freqs_.clear();
  for (uint32_t id : touched_) {
    if (collection_of_[id] == kNoCollection) collection_of_[id] = trie_collection(analyzer_.stem(id));
    const uint32_t collection = collection_of_[id];
    if (plan_.parsers_index && shared_.owner[collection] == 0) {  // the parser's own indexer's share
      own_stems_.push_back(id);
      freqs_.push_back(std::exchange(count_[id], 0));
      continue;
    }
    const std::string_view suffix = trie_suffix(analyzer_.stem(id), collection);
    Piece& piece = out[shared_.owner[collection]];
    piece.entries.push_back({collection, static_cast<uint32_t>(piece.suffixes.size()),
                             static_cast<uint32_t>(suffix.size()), doc, count_[id]});
    piece.suffixes.append(suffix);
    count_[id] = 0;
  }
  if (!own_stems_.empty()) own_->add_document(analyzer_, doc, own_stems_, freqs_);
}

// After a chunk's documents: the device inverts its shared stems while this parser reads the next
// one (the postings, the counts and the indexer's end of chunk follow then: finish_inversion), or
// its counts, hand-overs and end of chunk now; then the pieces to their indexers.
void Parser::end_chunk_of_split(DocId base, size_t split, uint64_t chunk_first, std::vector<Piece>& out) {
  const size_t chunk_documents = chunk_.size();
  chunk_.clear();
  if (device_inverts_) {
    try {
      gpu_->start_invert(static_cast<uint32_t>(analyzer_.shared_stem_capacity()));
      inverting_ = {true, base, chunk_documents, split, chunk_first};
      std::swap(inverting_lengths_, lengths_), std::swap(inverting_distinct_, distinct_),
          std::swap(inverting_on_device_, on_device_);
    } catch (const std::exception& e) {
      index_on_cpu(base, chunk_documents, on_device_, distinct_);
      drop_gpu(e.what());
    }
  }
  if (!inverting_.pending) {
    shared_.docs.set_counts(base, lengths_, distinct_);
    if (shared_.router != nullptr) shared_.router->hand_over(index_, take_routed_, shared_.failed);
    if (own_ != nullptr) end_chunk();
  }
  for (size_t i = 0; i < plan_.slots; ++i) {
    if (!out[i].entries.empty()) shared_.pieces[i]->push(std::move(out[i]));
  }
}

void Parser::run() {
  for (std::optional<size_t> next; !shared_.failed && (next = shared_.split_taker.next(index_));) {
    const size_t s = *next;
    SplitReader reader(plan_.splits[s]);
    uint64_t split_documents = 0;  // read before this chunk
    for (uint32_t seq = 0; !shared_.failed; ++seq) {
      const bool more = read_chunk(reader);
      const uint64_t chunk_first = split_documents;
      split_documents += chunk_.size();
      finish_inversion();  // the last chunk's, overlapped with reading this one
      if (!more) break;
      if (shared_.gpu_failed) drop_gpu(nullptr);
      if (options_.gpu_analysis && !gpu_taken_ && !shared_.gpu_failed) take_gpu();
      start_gpu_analysis();
      const DocId base = shared_.docs.add_chunk(s, seq, chunk_);  // while the GPU analyzes the chunk
      try {
        if (gpu_ != nullptr) {
          gpu_->finish();
          tokens_taken_ += gpu_->tokens();
        }
      } catch (const std::exception& e) {
        drop_gpu(e.what());
      }
      std::vector<Piece> out(plan_.slots);
      analyze_chunk(base, out);
      end_chunk_of_split(base, s, chunk_first, out);
    }
    shared_.docs.end_split(s, reader.lines(), std::move(reader.rejections()), reader.rejected());
  }
  if (!shared_.failed) finish_inversion();
  finish();
}

// What it holds to the owners, then the others' postings until all have finished (a parser that
// fails stops the build: nobody waits for it); its counts; its indexer's last run (with the run
// the device holds, before that goes).
void Parser::finish() {
  if (shared_.router != nullptr) shared_.router->finish(index_, take_routed_, shared_.failed);
  shared_.gpu_documents += on_gpu_, shared_.gpu_cpu_documents += on_cpu_, shared_.gpu_early_documents += early_,
      shared_.gpu_misses += misses_;
  shared_.gpu_tokens += tokens_taken_;
  if (own_ != nullptr && !shared_.failed) own_->spill();
  drop_gpu(gpu_run_ != nullptr && !own_->device_failure().empty() ? own_->device_failure().c_str() : nullptr);
  if (own_ != nullptr && !shared_.failed) {
    shared_.parser_runs[index_] = std::move(own_->runs());
    shared_.gpu_run_postings += own_->device_postings_written();
  }
}

}  // namespace

void run_parser(ParseShared& shared, size_t index) { Parser(shared, index).run(); }

}  // namespace warp::pipeline
