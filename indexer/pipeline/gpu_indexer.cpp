// The GPU indexer (indexers.hpp): pieces gathered into one batch until its share of the budget is
// full, then inverted on the GPU and written as a run.
#include <algorithm>
#include <span>

#include "indexer/gpu/gpu_inverter.hpp"
#include "indexer/pipeline/indexers.hpp"

namespace warp::pipeline {
namespace {

class GpuIndexer final : public Indexer {
 public:
  GpuIndexer(IndexerContext context, const GpuIndexerOptions& options)
      : Indexer(context), inverter_(options.device, options.hash_bits) {
    context.index += 1000000;  // its run files apart from this indexer's own
    fallback_ = make_cpu_indexer(std::move(context));
  }

  void consume(const Piece& piece) override {
    const uint32_t base = static_cast<uint32_t>(suffixes_.size());
    for (PieceEntry e : piece.entries) {
      e.suffix_offset += base;
      entries_.push_back(e);
    }
    suffixes_ += piece.suffixes;
    if (held() > context_.share()) spill();
  }

  void spill() override {
    if (entries_.empty()) return;
    inverter_.invert(entries_, suffixes_, batch_);
    if (batch_.collision) {  // two terms share a hash: this batch goes the CPU way
      ++fallbacks_;
      Piece piece;
      piece.entries.swap(entries_);
      piece.suffixes.swap(suffixes_);
      fallback_->consume(piece);
      fallback_->spill();
      for (RunInfo& run : fallback_->runs()) add_run(std::move(run));
      fallback_->runs().clear();
      entries_.swap(piece.entries);
      suffixes_.swap(piece.suffixes);
    } else {
      // The batch's distinct terms in bytewise order, as the CPU indexer writes them.
      const size_t terms = batch_.names.size();
      std::vector<std::pair<std::string, uint32_t>> order(terms);
      for (uint32_t t = 0; t < terms; ++t) {
        const PieceEntry& e = entries_[batch_.names[t]];
        order[t].first = collection_prefix(e.collection);
        order[t].first.append(suffixes_, e.suffix_offset, e.suffix_size);
        order[t].second = t;
      }
      std::sort(order.begin(), order.end());
      RunWriter writer(next_run_path());
      for (const auto& [term, t] : order) {
        const uint32_t begin = batch_.starts[t], end = batch_.starts[t + 1];
        writer.add(term, std::span<const Posting>(batch_.postings.data() + begin, end - begin));
      }
      add_run(writer.finish());
    }
    entries_.clear();
    suffixes_.clear();
  }

  double gpu_seconds() const override { return inverter_.gpu_seconds(); }
  uint64_t cpu_fallbacks() const override { return fallbacks_; }

 private:
  // The batch and what inverting it takes on the host: an entry, its sorted posting, at most one
  // start and one name per posting, and the suffix bytes. (The vectors keep their capacity from
  // batch to batch: the memory of the largest batch, which this bounds.)
  uint64_t held() const {
    return entries_.size() * (sizeof(PieceEntry) + sizeof(Posting) + 2 * sizeof(uint32_t)) + suffixes_.size();
  }

  GpuInverter inverter_;
  std::unique_ptr<Indexer> fallback_;
  std::vector<PieceEntry> entries_;
  std::string suffixes_;
  InvertedBatch batch_;
  uint64_t fallbacks_ = 0;
};

}  // namespace

std::unique_ptr<Indexer> make_gpu_indexer(IndexerContext context, const GpuIndexerOptions& options) {
  return std::make_unique<GpuIndexer>(std::move(context), options);
}

}  // namespace warp::pipeline
