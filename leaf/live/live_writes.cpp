#include "leaf/live/live_writes.hpp"

#include <map>
#include <string>

#include "leaf/live/live_processor.hpp"

namespace warp {

uint64_t LiveWrites::after() const {
  if (!writes_.empty()) return writes_.back().sequence;
  return base_ ? base_->write_sequence : 0;
}

std::shared_ptr<const LoadedIndex> LiveWrites::rebase(std::shared_ptr<const LoadedIndex> base) {
  base_ = std::move(base);
  while (!writes_.empty() && writes_.front().sequence <= base_->write_sequence) writes_.pop_front();
  if (!writes_.empty() && writes_.front().sequence != base_->write_sequence + 1) writes_.clear();  // a gap
  ids_.assign(base_->partitions.size(), {});
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const IndexView& view = base_->partitions[slot]->view();
    ids_[slot].reserve(view.external_ids.size());
    for (DocId d = 0; d < view.external_ids.size(); ++d)
      ids_[slot].emplace(view.external_ids[d], view.meta.doc_begin + d);
  }
  return snapshot();
}

std::shared_ptr<const LoadedIndex> LiveWrites::take(const transfer::TailAnswer& answer) {
  if (!answer.error.empty() || !base_) return nullptr;
  if (answer.epoch != epoch_) {  // statistics of other inputs: what is held no longer applies
    epoch_ = answer.epoch;
    writes_.clear();
    return snapshot();
  }
  if (answer.last < after()) {  // the indexer holds fewer writes than this leaf (its log was reset)
    writes_.clear();
    return snapshot();
  }
  if (waiting_for_generation()) return nullptr;
  bool added = false;
  for (const LoggedWrite& write : answer.writes) {
    if (write.sequence != after() + 1) continue;
    writes_.push_back(write);
    added = true;
  }
  return added ? snapshot() : nullptr;
}

std::shared_ptr<const LoadedIndex> LiveWrites::snapshot() const {
  if (writes_.empty() || waiting_for_generation()) return base_;
  auto live = std::make_shared<LoadedIndex>();
  live->generation = base_->generation;
  live->write_sequence = writes_.back().sequence;
  live->analyzer = base_->analyzer;
  live->partitions = base_->partitions;
  // Today's statistics, and the last op of each id written since.
  const CollectionStats stats{writes_.back().doc_count, writes_.back().total_length};
  auto df = std::make_shared<DfMap>();
  std::unordered_map<std::string_view, const LoggedWrite*> last;
  for (const LoggedWrite& write : writes_) {
    for (const auto& [term, value] : write.df) (*df)[term] = value;
    last[write.id] = &write;
  }
  std::map<uint64_t, const LoggedWrite*> puts;  // by sequence: the segment's order
  for (const auto& [id, write] : last)
    if (write->kind == LoggedWrite::Kind::kPut) puts.emplace(write->sequence, write);
  DocId generation_end = 0;  // the docIDs of the generation (collection-wide)
  for (const auto& partition : base_->partitions)
    generation_end = std::max<DocId>(generation_end, static_cast<DocId>(partition->view().meta.stats.doc_count));
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const IndexView& view = base_->partitions[slot]->view();
    auto overlay = std::make_shared<LiveOverlay>(make_overlay(view, stats, df));
    overlay->deleted.assign(view.doc_count(), 0);
    for (const auto& [id, write] : last) {
      auto it = ids_[slot].find(id);
      if (it != ids_[slot].end()) overlay->deleted[it->second - view.meta.doc_begin] = 1;
    }
    auto segment = std::make_shared<LiveSegment>();
    std::shared_ptr<const LiveOverlay> segment_overlay;
    BuildOptions options;
    options.codec = view.meta.codec, options.bm25 = view.meta.bm25;
    IndexBuilder builder(options);
    std::vector<std::string> tokens;
    for (const auto& [sequence, write] : puts) {
      if (live_partition_of(write->id, view.meta.partition_count) != view.meta.partition_id) continue;
      tokens.clear();
      for (const auto& [term, freq] : write->terms) tokens.insert(tokens.end(), freq, term);
      DocumentRecord record{write->id, write->title, write->url, write->length};
      builder.add_analyzed(record, tokens);
      segment->records.push_back(std::move(record));
      segment->global.push_back(generation_end + static_cast<DocId>(sequence - base_->write_sequence));
    }
    if (builder.document_count() > 0) {
      std::vector<BuiltPartition> built = builder.build();
      segment->view = std::make_unique<IndexView>(std::move(built.front().view));
      segment_overlay = std::make_shared<LiveOverlay>(make_overlay(*segment->view, stats, df));
    }
    live->cpu.push_back(std::make_shared<LiveQueryProcessor>(base_->cpu[slot], std::move(overlay), segment,
                                                             std::move(segment_overlay)));
    live->live.push_back(std::move(segment));
  }
  return live;
}

}  // namespace warp
