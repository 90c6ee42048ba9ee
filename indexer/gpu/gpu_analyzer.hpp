// The parsers' text analysis on the GPU (`warp-indexer build --gpu-analysis`): what
// Analyzer::analyze_stems does to ASCII text — tokens of [0-9A-Za-z], folded to lower case, the
// length cap, and each token's stem id from the stem cache — done for a whole chunk at once on the
// device, against a GPU table of the tokens the shared stem cache has already stemmed.
//
// At 16 threads the analysis and the shared stem cache were ~38% of the parse's CPU (tests/bench/results/indexing.md):
// memory-bound lookups into a table of hundreds of MB, slower per thread the more threads share it. The GPU does them
// with its own memory; what it cannot answer stays on the CPU, so the stems are exactly the CPU analyzer's:
// - a document with any byte outside ASCII is analyzed on the CPU, whole (case folding of other
//   scripts, the tokenizer's classes);
// - a token the table does not hold yet (first sight; longer than a slot's 24 bytes) comes back as
//   kMiss with its offset: the parser looks it up or stems it on the CPU (Analyzer::folded_stem_id)
//   and, where the id is the shared cache's, teaches the table (learn), so it is found next time.
// Analyzers without stop-word removal only (stop words are a per-token rule the GPU does not apply).
//
// Host-only header; builds without CUDA get a stub whose constructors throw.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace warp {
class Analyzer;
}

namespace warp::pipeline {

// Folded token → stem id, on the device: insert-only open addressing, shared by every parser's
// GpuAnalyzer (each inserts and looks up on its own stream; a slot still being written reads as a
// miss). Holds at most `tokens` tokens (half its slots), 32 bytes a slot.
class GpuTokenTable {
 public:
  GpuTokenTable(int device, size_t tokens);  // throws Error where no GPU is usable
  ~GpuTokenTable();
  GpuTokenTable(const GpuTokenTable&) = delete;
  GpuTokenTable& operator=(const GpuTokenTable&) = delete;
  int device() const { return device_; }
  size_t slots() const { return slots_; }
  size_t capacity() const { return slots_ / 2; }
  void* device_slots() const { return slots_data_; }
  unsigned* device_count() const { return count_; }
  // By shared stem id: its term's first 8 bytes (term_prefix), written as parsers note the stems
  // (GpuAnalyzer::note_stem); 0 for a stem not noted yet. The runs' stems are ordered by them.
  unsigned long long* device_prefixes() const { return prefixes_; }
  size_t stems() const { return stems_; }

 private:
  int device_ = 0;
  size_t slots_ = 0;
  void* slots_data_ = nullptr;
  unsigned* count_ = nullptr;  // tokens inserted (inserts stop at capacity())
  unsigned long long* prefixes_ = nullptr;
  size_t stems_ = 0;
};

// One parser's: its stream, its pinned staging and its device buffers. Not thread-safe.
class GpuAnalyzer {
 public:
  static constexpr uint32_t kMiss = 0xFFFFFFFFu;          // look this token up on the CPU
  static constexpr uint32_t kDropped = 0xFFFFFFFEu;       // longer than the length cap: no term
  static constexpr size_t kSlotTokenBytes = 24;           // longer tokens are always misses
  static constexpr size_t kMaxLearned = size_t{1} << 16;  // tokens taught to the table a run

  GpuAnalyzer(GpuTokenTable& table, size_t max_token_bytes);
  ~GpuAnalyzer();
  GpuAnalyzer(const GpuAnalyzer&) = delete;
  GpuAnalyzer& operator=(const GpuAnalyzer&) = delete;

  // Sizes the device's buffers for chunks of `text_bytes` up front (growing one frees the old one,
  // which waits for every parser's stream on the device: with them grown chunk by chunk, a 16-thread
  // build had spent 4.8 s in the GPU's calls instead of 2.1) and the staging text.
  void reserve(size_t text_bytes);
  // Launches every kernel once on an empty chunk: CUDA loads a kernel's module at its first launch,
  // under a lock of the context's, and sixteen parsers' first chunks had queued there.
  void warm_up();
  // A chunk: documents added one by one (their title and body, analyzed as two texts), then run().
  void begin_chunk();
  void add_document(std::string_view title, std::string_view body);
  size_t documents() const { return doc_begin_.size() - 1; }
  // Teaches the table a token's shared stem id (applied on the device before the next run).
  void learn(std::string_view folded_token, uint32_t stem_id);
  // A shared stem a patch or a lesson names, with its term's term_prefix: written to the table's
  // prefixes (once per analyzer) before the lesson's insert and before the next sort_run(), both on
  // this analyzer's stream, so that every stem of a run has its prefix when the run is sorted.
  void note_stem(uint32_t stem_id, uint64_t prefix) {
    if (stem_id >= table_.stems()) return;
    uint64_t& word = noted_[stem_id / 64];
    const uint64_t bit = uint64_t{1} << (stem_id % 64);
    if (word & bit) return;
    word |= bit;
    noted_prefixes_.insert(noted_prefixes_.end(), {stem_id, prefix});
  }
  // Analyzes the chunk on the device: start() queues the work, finish() waits for it (the caller
  // may do other work between them, but not touch this analyzer); run() does both. The results
  // below are valid after finish() until the next begin_chunk().
  void start();
  void finish();
  void run() {
    start();
    finish();
  }

  // The device's inversion of the chunk's shared stems (the parsers' own indexers then append
  // each stem's postings at once instead of a document's postings one stem at a time). After
  // finish(): the caller patches every kMiss token whose stem is the shared cache's (the others,
  // and documents outside ASCII, are left out: the CPU indexes them), then invert() sorts the
  // tokens by (stem id, document) on the device and counts equal ones. Valid until begin_chunk().
  void patch(uint32_t token, uint32_t stem_id) {
    patches_.insert(patches_.end(), {token, stem_id});
    values_[token] = stem_id;  // token_values() then hold every shared stem (a CPU fallback reads them)
  }
  // `stem_bound`: every stem id patched or in the table is below it (the shared cache's capacity).
  // start_invert() queues the work and the copies back (one wait in all, in finish_invert()); the
  // caller may read its next chunk meanwhile, but not touch this analyzer until finish_invert().
  // The chunk's tokens and texts stay valid until the next begin_chunk(), for a CPU fallback.
  void start_invert(uint32_t stem_bound);
  void finish_invert();
  void invert(uint32_t stem_bound) {
    start_invert(stem_bound);
    finish_invert();
  }
  // (stem id << 32 | document in the chunk), sorted, and each one's frequency.
  size_t postings() const { return postings_; }
  const uint64_t* posting_keys() const { return posting_keys_; }
  const uint32_t* posting_freqs() const { return posting_freqs_; }
  // Per document of the chunk: its distinct shared stems among the postings above.
  const uint32_t* doc_distinct() const { return doc_distinct_; }

  // The chunks' postings kept on the device for the parser's indexer, until its spill sorts them
  // and takes them back in term order (a RunOnDevice, indexers.hpp; the adapter is GpuRun).
  static constexpr size_t kRunFetch = size_t{1} << 16;  // postings a fetch_run() at most (512 KiB pinned)
  // Device room for a run of `postings` of at most `stems` distinct stems (at most half the
  // device's memory shared by `parsers`, ~26 bytes a posting), and the pinned slice fetch_run()
  // copies into.
  void reserve_run(size_t postings, size_t stems, size_t parsers);
  size_t run_capacity() const { return run_capacity_; }
  // After finish_invert(): the chunk's postings appended to the run with `base` added to their
  // documents (keys then hold the docID); false, and nothing appended, where the run lacks room.
  bool append_to_run(uint32_t base);
  size_t run_postings() const { return run_size_; }
  // The run sorted by (stem id, document): its distinct stems ascending and where each one's
  // postings begin (and, last, the run's end).
  void sort_run(std::vector<uint32_t>& stems, std::vector<uint32_t>& begins);
  // The sorted run laid out so that stems[i]'s postings begin at out_begins[i], as (docID,
  // frequency) pairs: 8 bytes a posting, the docID first.
  void order_run(const std::vector<uint32_t>& out_begins);
  // `count` (at most kRunFetch) pairs from `from` of that layout; valid until the next call.
  const uint32_t* fetch_run(size_t from, size_t count);
  // After sort_run(): the stems' indexes ordered by their prefixes (the table's), and those prefixes.
  void order_run_stems(std::vector<uint32_t>& by_prefix, std::vector<uint64_t>& prefixes);
  void clear_run() { run_size_ = 0; }

  // The chunk's text as staged (a document's bytes from doc_begin(d) to doc_begin(d + 1)).
  const char* text() const { return text_; }
  uint32_t doc_begin(size_t doc) const { return doc_begin_[doc]; }
  // Whether document `doc` holds a byte outside ASCII: its tokens below are to be ignored.
  bool non_ascii(size_t doc) const { return flags_[doc] != 0; }
  // The chunk's tokens in text order: each one's offset in text() and its stem id, kMiss or kDropped.
  uint32_t tokens() const { return tokens_; }
  const uint32_t* token_starts() const { return starts_; }
  const uint32_t* token_values() const { return values_; }
  // Seconds spent in start() and finish() (device work and copies not overlapped), summed.
  double gpu_seconds() const { return gpu_seconds_; }

 private:
  void grow_text(size_t bytes);
  struct State;
  std::unique_ptr<State> state_;
  GpuTokenTable& table_;
  size_t max_token_bytes_;
  char* text_ = nullptr;  // pinned
  size_t text_size_ = 0, text_capacity_ = 0;
  std::vector<uint32_t> doc_begin_{0};
  std::vector<uint64_t> learned_;         // four words a token: its 24 bytes zero-padded, then its id
  std::vector<uint64_t> noted_;           // by stem id, a bit: its prefix written (or queued)
  std::vector<uint64_t> noted_prefixes_;  // queued: stem id, prefix
  void write_noted_prefixes();
  uint8_t* flags_ = nullptr;    // pinned, per document
  uint32_t* starts_ = nullptr;  // pinned, per token
  uint32_t* values_ = nullptr;
  uint32_t tokens_ = 0;
  bool started_ = false, inverting_ = false;
  std::vector<uint32_t> patches_;     // token, stem id
  uint64_t* posting_keys_ = nullptr;  // pinned
  uint32_t* posting_freqs_ = nullptr;
  uint32_t* doc_distinct_ = nullptr;
  size_t postings_ = 0;
  uint32_t stem_bound_ = 1;  // of the last inversion: every stem id is below it
  size_t run_size_ = 0, run_capacity_ = 0, run_distinct_ = 0;
  uint32_t* run_fetched_ = nullptr;  // pinned: kRunFetch pairs
  double gpu_seconds_ = 0;
};

// Document `doc`'s stem ids from the GPU's analysis of its chunk, appended to `stems`; `next` is
// the chunk's first token not yet taken (every token of the document is passed over). A token the
// GPU missed is looked up (or stemmed) by `analyzer`, and the GPU's table learns it where its id is
// the shared cache's (`misses` counts them). False, and no stem, for a document with bytes outside
// ASCII: the caller analyzes it on the CPU. (indexer/pipeline/gpu_stems.cpp)
bool take_document_stems(GpuAnalyzer& gpu, size_t doc, uint32_t& next, Analyzer& analyzer, std::vector<uint32_t>& stems,
                         std::string& folded, uint64_t& misses);

// The same for a chunk the device inverts (GpuAnalyzer::invert): of document `doc`'s tokens, the
// misses whose stems are the shared cache's are patched in, those of the analyzer's own cache
// appended to `own_stems` (the CPU indexes them), and `length` counts its terms. False, and
// nothing taken, for a document with bytes outside ASCII.
bool take_document_tokens(GpuAnalyzer& gpu, size_t doc, uint32_t& next, Analyzer& analyzer,
                          std::vector<uint32_t>& own_stems, uint32_t& length, std::string& folded, uint64_t& misses);

// True when this build has CUDA and a GPU of that ordinal exists; else false with the
// reason in `why`.
bool gpu_analysis_available(int device, std::string* why = nullptr);

}  // namespace warp::pipeline
