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
  chunks_.assign(base_->partitions.size(), {});
  ids_.assign(base_->partitions.size(), {});
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const IndexView& view = base_->partitions[slot]->view();
    ids_[slot].reserve(view.external_ids.size());
    for (DocId d = 0; d < view.external_ids.size(); ++d)
      ids_[slot].emplace(view.external_ids[d], view.meta.doc_begin + d);
  }
  add_chunks(0);  // what the new generation does not hold, in one segment a partition
  return snapshot();
}

std::shared_ptr<const LoadedIndex> LiveWrites::take(const transfer::TailAnswer& answer) {
  if (!answer.error.empty() || !base_) return nullptr;
  if (answer.epoch != epoch_ || answer.last < after()) {
    // Statistics of other inputs, or an indexer that holds fewer writes than this leaf (its log
    // was reset): what is held no longer applies.
    epoch_ = answer.epoch;
    writes_.clear();
    chunks_.assign(base_->partitions.size(), {});
    return snapshot();
  }
  if (waiting_for_generation()) return nullptr;
  const size_t from = writes_.size();
  for (const LoggedWrite& write : answer.writes)
    if (write.sequence == after() + 1) writes_.push_back(write);
  if (writes_.size() == from) return nullptr;
  add_chunks(from);
  return snapshot();
}

LiveWrites::Chunk LiveWrites::build_chunk(size_t slot, const std::vector<const LoggedWrite*>& writes) const {
  const IndexView& view = base_->partitions[slot]->view();
  const DocId generation_end = static_cast<DocId>(view.meta.stats.doc_count);  // the generation's docIDs
  BuildOptions options;
  options.codec = view.meta.codec, options.bm25 = view.meta.bm25;
  IndexBuilder builder(options);
  Chunk chunk;
  chunk.segment = std::make_shared<LiveSegment>();
  std::vector<std::string> tokens;
  for (const LoggedWrite* write : writes) {
    tokens.clear();
    for (const auto& [term, freq] : write->terms) tokens.insert(tokens.end(), freq, term);
    DocumentRecord record{write->id, write->title, write->url, write->length};
    builder.add_analyzed(record, tokens);
    chunk.segment->records.push_back(std::move(record));
    chunk.segment->global.push_back(generation_end + static_cast<DocId>(write->sequence - base_->write_sequence));
    chunk.writes.push_back(write);
  }
  if (builder.document_count() > 0)
    chunk.segment->view = std::make_unique<IndexView>(std::move(builder.build().front().view));
  return chunk;
}

void LiveWrites::add_chunks(size_t from) {
  // The last write of each id among the new ones: earlier copies in them are never searched.
  std::unordered_map<std::string_view, const LoggedWrite*> last;
  for (size_t i = from; i < writes_.size(); ++i) last[writes_[i].id] = &writes_[i];
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const PartitionMeta& meta = base_->partitions[slot]->view().meta;
    std::vector<const LoggedWrite*> puts;
    for (size_t i = from; i < writes_.size(); ++i) {
      const LoggedWrite& write = writes_[i];
      if (write.kind == LoggedWrite::Kind::kPut && last[write.id] == &write &&
          live_partition_of(write.id, meta.partition_count) == meta.partition_id)
        puts.push_back(&write);
    }
    std::vector<Chunk>& chunks = chunks_[slot];
    if (!puts.empty()) chunks.push_back(build_chunk(slot, puts));
    // Merge the two newest while the older is at most twice the newer (a binary counter), keeping
    // the documents still searched: those whose write is the last of their id.
    std::unordered_map<std::string_view, uint64_t> latest;  // made on the first merge
    while (chunks.size() >= 2 && chunks[chunks.size() - 2].writes.size() <= 2 * chunks.back().writes.size()) {
      if (latest.empty())
        for (const LoggedWrite& write : writes_) latest[write.id] = write.sequence;
      std::vector<const LoggedWrite*> kept;
      for (size_t c = chunks.size() - 2; c < chunks.size(); ++c)
        for (const LoggedWrite* write : chunks[c].writes)
          if (latest[write->id] == write->sequence) kept.push_back(write);
      chunks.pop_back();
      chunks.back() = build_chunk(slot, kept);
      if (chunks.back().writes.empty()) chunks.pop_back();  // every one written again since
    }
  }
}

std::shared_ptr<const LoadedIndex> LiveWrites::snapshot() const {
  if (writes_.empty() || waiting_for_generation()) return base_;
  auto live = std::make_shared<LoadedIndex>();
  live->generation = base_->generation;
  live->write_sequence = writes_.back().sequence;
  live->analyzer = base_->analyzer;
  live->partitions = base_->partitions;
  // Today's statistics, and the last write of each id written since.
  const CollectionStats stats{writes_.back().doc_count, writes_.back().total_length};
  auto df = std::make_shared<DfMap>();
  std::unordered_map<std::string_view, uint64_t> last;
  for (const LoggedWrite& write : writes_) {
    for (const auto& [term, value] : write.df) (*df)[term] = value;
    last[write.id] = write.sequence;
  }
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const IndexView& view = base_->partitions[slot]->view();
    auto overlay = std::make_shared<LiveOverlay>(make_overlay(view, stats, df));
    overlay->deleted.assign(view.doc_count(), 0);
    for (const auto& [id, sequence] : last) {
      auto it = ids_[slot].find(id);
      if (it != ids_[slot].end()) overlay->deleted[it->second - view.meta.doc_begin] = 1;
    }
    std::vector<OverlaidSegment> segments;
    live->live.emplace_back();
    for (const Chunk& chunk : chunks_[slot]) {
      auto segment_overlay = std::make_shared<LiveOverlay>(make_overlay(*chunk.segment->view, stats, df));
      segment_overlay->deleted.assign(chunk.writes.size(), 0);
      bool any = false;
      for (size_t d = 0; d < chunk.writes.size(); ++d)
        if (last[chunk.writes[d]->id] != chunk.writes[d]->sequence) segment_overlay->deleted[d] = 1, any = true;
      if (!any) segment_overlay->deleted.clear();
      segments.push_back({chunk.segment, std::move(segment_overlay)});
      live->live.back().push_back(chunk.segment);
    }
    live->cpu.push_back(
        std::make_shared<LiveQueryProcessor>(base_->cpu[slot], std::move(overlay), std::move(segments)));
  }
  return live;
}

}  // namespace warp
