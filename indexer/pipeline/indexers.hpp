// The indexers of the pipeline (Wei & JaJa 2010 §III.C–E): each owns some trie collections,
// takes the parsers' pieces for them and writes what it holds as sorted run files (run_file.hpp)
// whenever its share of the memory budget is full, and at the end.
// - CPU indexers keep each collection's dictionary as a B-tree (term_btree.hpp) and postings in
//   an arena.
// - GPU indexers gather a batch of pieces and invert it on the GPU (gpu_inverter.hpp): terms
//   hashed, postings radix-sorted by (term, doc), runs of equal terms found; the CPU only orders
//   the batch's distinct terms and writes the run. A batch where two terms share a hash goes to a
//   CPU indexer instead, so the runs are always exact.
// Both write the same runs for the same postings, so the partitions do not depend on which kind
// indexed which collection.
#pragma once
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "common/index/types.hpp"
#include "indexer/postings/piece.hpp"
#include "indexer/pipeline/posting_router.hpp"
#include "indexer/pipeline/run_file.hpp"
#include "indexer/postings/trie_collections.hpp"

namespace warp::pipeline {

struct IndexerContext {
  size_t index = 0;  // names this indexer's run files
  std::string spill_dir;
  std::function<uint64_t()> share;  // bytes it may hold before it spills
  std::atomic<uint64_t>* runs_written = nullptr;
};

class Indexer {
 public:
  explicit Indexer(IndexerContext context) : context_(std::move(context)) {}
  virtual ~Indexer() = default;
  Indexer(const Indexer&) = delete;
  Indexer& operator=(const Indexer&) = delete;

  virtual void consume(const Piece& piece) = 0;
  virtual void spill() = 0;  // everything held, as one more run; then empty
  std::vector<RunInfo>& runs() { return runs_; }
  virtual double gpu_seconds() const { return 0; }      // GPU indexers: device work and copies
  virtual uint64_t cpu_fallbacks() const { return 0; }  // GPU indexers: batches a CPU indexer took

 protected:
  std::string next_run_path();
  void add_run(RunInfo run);

  IndexerContext context_;
  std::vector<RunInfo> runs_;
  uint64_t run_names_ = 0;
};

std::unique_ptr<Indexer> make_cpu_indexer(IndexerContext context);

// The CPU indexer a parser owns when every parser indexes its own chunks: it takes the parser's
// postings as the analyzer's stem ids and keeps the lists of shared stems by id (no dictionary);
// a stem of the analyzer's own cache is looked up in its dictionary once per stem cache epoch and
// run instead of once per posting (no pieces, no suffix copies). Same runs as consume() would
// write for the same postings.
// A run's postings of shared stems held on a device (the GPU analysis keeps each chunk's inverted
// postings there): at a spill the device sorts them and hands them back in term order, so the host
// neither files them into its lists one posting at a time nor gathers and sorts them again, and
// they take none of the indexer's share of host memory. Where the device fails, replay() derives
// the same postings on the host (the GPU analysis reads and analyzes the run's chunks again).
// Calls but replay() throw Error on a device failure.
class RunOnDevice {
 public:
  using Sink = std::function<void(uint32_t stem, DocId doc, TermFreq freq)>;
  virtual ~RunOnDevice() = default;
  // Sorts the run by (stem, document): its distinct stems ascending in `stems`, where each one's
  // postings begin in `begins` (one more: the run's end); and `by_prefix`: the indexes of `stems`
  // ordered by their terms' first 8 bytes (term_prefix), ties in any order, with those prefixes in
  // `prefixes` (both left empty where the device does not order them: the host does).
  virtual void sort(std::vector<uint32_t>& stems, std::vector<uint32_t>& begins, std::vector<uint32_t>& by_prefix,
                    std::vector<uint64_t>& prefixes) = 0;
  // Lays the stems' postings out so that stems[i]'s begin at `out_begins[i]`.
  virtual void order(const std::vector<uint32_t>& out_begins) = 0;
  // `count` (at most fetch_max()) postings of that layout from `from`; valid until the next call.
  virtual const Posting* fetch(size_t from, size_t count) = 0;
  virtual size_t fetch_max() const = 0;
  // Every posting of the run to `sink`, derived on the host, in any order.
  virtual void replay(const Sink& sink) = 0;
  virtual void clear() = 0;  // an empty run
};

class ParserIndexer : public Indexer {
 public:
  using Indexer::Indexer;
  // A document's postings: `stems` (ids of `analyzer`'s stem cache in its current epoch, each
  // once) with their frequencies `freqs`.
  virtual void add_document(const Analyzer& analyzer, DocId doc, std::span<const uint32_t> stems,
                            std::span<const uint32_t> freqs) = 0;
  // A chunk's postings of shared stems inverted elsewhere (the GPU analysis): `keys` (stem id <<
  // 32 | docID − `base`) sorted, with their frequencies. The lists are add_document's for the same
  // postings; a stem's are appended together.
  virtual void add_sorted_postings(const Analyzer& analyzer, DocId base, const uint64_t* keys, const uint32_t* freqs,
                                   size_t n) = 0;
  // The same postings, which the run on the device (set_run_on_device) now holds: only counted,
  // unless that device failed at a spill, when they are filed as add_sorted_postings files them.
  virtual void add_device_postings(const Analyzer& analyzer, DocId base, const uint64_t* keys, const uint32_t* freqs,
                                   size_t n) = 0;
  // Where add_device_postings' postings are (nullptr: nowhere; what the device held is then
  // replayed into the host's lists). A device that fails at a spill is dropped the same way, and its error kept.
  virtual void set_run_on_device(RunOnDevice* run) = 0;
  virtual const std::string& device_failure() const = 0;
  virtual uint64_t device_postings_written() const = 0;  // postings its runs took from the device
  // The postings a run on the device should have room for: as many as its share would hold at 4
  // bytes each, and 16 million at least (the device keeps ~26 bytes a posting: 0.4-0.65 GB a parser
  // at 16 parsers and a 2 GiB budget; GpuAnalyzer::reserve_run caps it by the device's memory).
  static size_t device_run_room(uint64_t share_bytes) {
    return static_cast<size_t>(
        std::min<uint64_t>(std::max<uint64_t>(share_bytes / 4, uint64_t{1} << 24), uint64_t{1} << 28));
  }
  // Before any postings: this indexer's parser is `self` of `parsers` that route the shared stems'
  // postings to their owners (PostingRouter). Its lists of shared stems are then kept per parser
  // that read the documents, and a run writes a stem's parts parser by parser, each in that
  // parser's docID order (the parsers read consecutive ranges of the input: final docID order,
  // as the back end expects of a run), not sorted by the provisional docIDs.
  virtual void set_routing(size_t parsers, size_t self) = 0;
  // Postings of the shared stems this indexer's parser owns from parser `from`'s documents, in the
  // order that parser read them.
  virtual void add_routed(const Analyzer& analyzer, size_t from, std::span<const RoutedPosting> postings) = 0;
  // Spills when it holds more than its share; called between chunks.
  virtual void end_chunk() = 0;
  // Memory it holds per stem of the shared stem cache (a list's entry by stem id), outside its share.
  static constexpr size_t kBytesPerSharedStem = 12;
};
std::unique_ptr<ParserIndexer> make_parser_indexer(IndexerContext context);

struct GpuIndexerOptions {
  int device = 0;
  unsigned hash_bits = 64;  // fewer only in tests: collisions, so the CPU fallback runs
};
// Throws Error naming the reason where this build or machine has no usable GPU.
std::unique_ptr<Indexer> make_gpu_indexer(IndexerContext context, const GpuIndexerOptions& options);

}  // namespace warp::pipeline
