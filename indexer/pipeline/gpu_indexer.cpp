// The GPU indexer (indexers.hpp): pieces gathered into a batch, which a worker thread inverts on
// the GPU and writes as a run while the next batch fills, so the GPU's work overlaps the parsing
// instead of piling up at the end. A batch closes at half the indexer's share of the budget (two
// are held at once) or at kBatchPostings, whichever comes first.
#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "indexer/gpu/gpu_inverter.hpp"
#include "indexer/pipeline/indexers.hpp"

namespace warp::pipeline {
namespace {

constexpr size_t kBatchPostings = size_t{4} << 20;

struct Batch {
  std::vector<PieceEntry> entries;
  std::string suffixes;
  // On the host per posting: the entry, its sorted posting, at most one start, name, order slot
  // and key; and the suffix bytes. (Vectors keep their capacity: the largest batch's memory.)
  uint64_t bytes() const {
    return entries.size() * (sizeof(PieceEntry) + sizeof(Posting) + 4 * sizeof(uint32_t) + sizeof(uint64_t)) +
           suffixes.size();
  }
};

class GpuIndexer final : public Indexer {
 public:
  GpuIndexer(IndexerContext context, const GpuIndexerOptions& options)
      : Indexer(context), inverter_(options.device, options.hash_bits) {
    context.index += 1000000;  // its run files apart from this indexer's own
    fallback_ = make_cpu_indexer(std::move(context));
    worker_ = std::thread([this] { work(); });
  }

  ~GpuIndexer() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  void consume(const Piece& piece) override {
    const uint32_t base = static_cast<uint32_t>(filling_.suffixes.size());
    for (PieceEntry e : piece.entries) {
      e.suffix_offset += base;
      filling_.entries.push_back(e);
    }
    filling_.suffixes += piece.suffixes;
    if (filling_.bytes() > context_.share() / 2 || filling_.entries.size() >= kBatchPostings) hand_over();
  }

  // The batch being filled to the worker, then waits until the worker has written everything.
  void spill() override {
    hand_over();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ || failure_; });
    rethrow_failure();
  }

  double gpu_seconds() const override { return inverter_.gpu_seconds(); }
  uint64_t cpu_fallbacks() const override { return fallbacks_; }

 private:
  void hand_over() {
    if (filling_.entries.empty()) return;
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !pending_ || failure_; });  // the previous batch is written
    rethrow_failure();
    std::swap(filling_, working_);
    filling_.entries.clear();
    filling_.suffixes.clear();
    pending_ = true;
    changed_.notify_all();
  }

  void rethrow_failure() {
    if (failure_) std::rethrow_exception(failure_);
  }

  void work() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return pending_ || stopping_; });
        if (!pending_) return;
      }
      try {
        write(working_);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_ = false;
      }
      changed_.notify_all();
    }
  }

  void write(Batch& batch) {
    inverter_.invert(batch.entries, batch.suffixes, inverted_);
    if (inverted_.collision) {  // two terms share a hash: this batch goes the CPU way
      ++fallbacks_;
      Piece piece;
      piece.entries.swap(batch.entries);
      piece.suffixes.swap(batch.suffixes);
      fallback_->consume(piece);
      fallback_->spill();
      for (RunInfo& run : fallback_->runs()) add_run(std::move(run));
      fallback_->runs().clear();
      batch.entries.swap(piece.entries);
      batch.suffixes.swap(piece.suffixes);
      return;
    }
    // The batch's distinct terms in bytewise order, as the CPU indexer writes them: the device
    // ordered them by their first 8 bytes; runs of equal keys are ordered here.
    const std::vector<uint32_t>& order = inverted_.order;
    const auto term_of = [&](uint32_t t, std::string& into) {
      const PieceEntry& e = batch.entries[inverted_.names[t]];
      into = collection_prefix(e.collection);
      into.append(batch.suffixes, e.suffix_offset, e.suffix_size);
    };
    RunWriter writer(next_run_path());
    std::string term;
    std::vector<std::pair<std::string, uint32_t>> tied;
    const auto add = [&](const std::string& text, uint32_t t) {
      const uint32_t begin = inverted_.starts[t], end = inverted_.starts[t + 1];
      writer.add(text, std::span<const Posting>(inverted_.postings.data() + begin, end - begin));
    };
    for (size_t i = 0; i < order.size();) {
      size_t j = i + 1;
      while (j < order.size() && inverted_.keys[j] == inverted_.keys[i]) ++j;
      if (j == i + 1) {
        term_of(order[i], term);
        add(term, order[i]);
      } else {
        tied.resize(j - i);
        for (size_t k = i; k < j; ++k) term_of(order[k], tied[k - i].first), tied[k - i].second = order[k];
        std::sort(tied.begin(), tied.end());
        for (const auto& [text, t] : tied) add(text, t);
      }
      i = j;
    }
    add_run(writer.finish());
  }

  GpuInverter inverter_;
  std::unique_ptr<Indexer> fallback_;
  Batch filling_, working_;  // filled by the indexer's thread, written by the worker
  InvertedBatch inverted_;   // the worker's
  uint64_t fallbacks_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pending_ = false, stopping_ = false;
  std::exception_ptr failure_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Indexer> make_gpu_indexer(IndexerContext context, const GpuIndexerOptions& options) {
  return std::make_unique<GpuIndexer>(std::move(context), options);
}

}  // namespace warp::pipeline
