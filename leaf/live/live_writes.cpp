#include "leaf/live/live_writes.hpp"

#include <string>

#include "leaf/live/live_processor.hpp"

namespace warp {

namespace {
// Tiered merging: a segment's tier is log4 of its documents, and the newest four are merged when
// the oldest of them is of no higher tier than the newest (a written document is indexed again
// about log4 of the documents held times; about three segments a tier are searched).
constexpr size_t kFanIn = 4;
size_t tier(size_t documents) {
  size_t t = 0;
  for (; documents >= kFanIn; documents /= kFanIn) ++t;
  return t;
}
// Binary-counter merging of the df layers: the two newest while the older is at most twice the newer.
bool merge_due(size_t older, size_t newer) { return older <= 2 * newer; }
}  // namespace

uint64_t LiveWrites::after() const {
  if (!writes_.empty()) return writes_.back().sequence;
  return base_ ? base_->write_sequence : 0;
}

void LiveWrites::reset() {
  const size_t slots = base_ ? base_->partitions.size() : 0;
  chunks_.assign(slots, {});
  base_deleted_.assign(slots, {});
  for (size_t slot = 0; slot < slots; ++slot)
    base_deleted_[slot].assign(base_->partitions[slot]->view().doc_count(), 0);
  latest_.clear(), where_.clear(), df_layers_.clear();
}

std::shared_ptr<const LoadedIndex> LiveWrites::rebase(std::shared_ptr<const LoadedIndex> base) {
  const std::shared_ptr<const LoadedIndex> old = std::move(base_);
  base_ = std::move(base);
  const uint64_t held = base_->write_sequence;
  bool same_partitions = old && old->partitions.size() == base_->partitions.size();
  for (size_t slot = 0; same_partitions && slot < base_->partitions.size(); ++slot) {
    const PartitionMeta &was = old->partitions[slot]->view().meta, &now = base_->partitions[slot]->view().meta;
    same_partitions = was.partition_id == now.partition_id && was.partition_count == now.partition_count;
  }
  // The segments stay, their documents the new generation holds masked and the others given
  // docIDs past its own: no document is indexed again (a swap rebuilt every write the new
  // generation did not hold, seconds of them, on the thread that applies the tail).
  const bool keep =
      same_partitions && !writes_.empty() && writes_.front().sequence <= held + 1 && writes_.back().sequence > held;
  if (keep) {
    for (size_t slot = 0; slot < chunks_.size(); ++slot) {
      const DocId generation_end = static_cast<DocId>(base_->partitions[slot]->view().meta.stats.doc_count);
      std::vector<std::shared_ptr<Chunk>> kept;
      for (const auto& chunk : chunks_[slot]) {
        auto copy = std::make_shared<Chunk>(*chunk);
        copy->segment = std::make_shared<LiveSegment>(*chunk->segment);
        for (size_t d = 0; d < copy->writes.size(); ++d) {
          const uint64_t sequence = copy->writes[d]->sequence;  // read before the writes it holds go
          if (sequence <= held && !copy->deleted[d]) copy->deleted[d] = 1, ++copy->deleted_count;
          copy->segment->global[d] = generation_end + static_cast<DocId>(sequence > held ? sequence - held : 0);
        }
        if (copy->deleted_count < copy->writes.size()) kept.push_back(std::move(copy));
      }
      chunks_[slot] = std::move(kept);
    }
  }
  while (!writes_.empty() && writes_.front().sequence <= held) writes_.pop_front();
  if (!writes_.empty() && writes_.front().sequence != held + 1) writes_.clear();  // a gap
  ids_.assign(base_->partitions.size(), nullptr);
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) ids_[slot] = &base_->partitions[slot]->ids();
  if (!keep) {
    reset();
    absorb(0);  // what the new generation does not hold
    return snapshot();
  }
  // The maps into the writes dropped are made again from those held; the df layers stay (a term
  // last moved by a write the generation holds has that df in the generation too).
  latest_.clear(), where_.clear();
  for (const LoggedWrite& write : writes_) latest_[write.id] = write.sequence;
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    base_deleted_[slot].assign(base_->partitions[slot]->view().doc_count(), 0);
    for (const auto& chunk : chunks_[slot])
      for (size_t d = 0; d < chunk->writes.size(); ++d)
        if (!chunk->deleted[d]) where_[chunk->writes[d]->id] = {chunk.get(), static_cast<uint32_t>(d)};
  }
  for (const auto& [id, sequence] : latest_) {
    for (size_t slot = 0; slot < ids_.size(); ++slot) {
      auto it = ids_[slot]->find(id);
      if (it != ids_[slot]->end()) base_deleted_[slot][it->second - base_->partitions[slot]->view().meta.doc_begin] = 1;
    }
  }
  return snapshot();
}

std::shared_ptr<const LoadedIndex> LiveWrites::take(const transfer::TailAnswer& answer) {
  if (!answer.error.empty() || !base_) return nullptr;
  if (answer.epoch != epoch_ || answer.last < after()) {
    // Statistics of other inputs, or an indexer that holds fewer writes than this leaf (its log
    // was reset): what is held no longer applies.
    epoch_ = answer.epoch;
    writes_.clear();
    reset();
    return snapshot();
  }
  if (waiting_for_generation()) return nullptr;
  const size_t from = writes_.size();
  for (const LoggedWrite& write : answer.writes)
    if (write.sequence == after() + 1) writes_.push_back(write);
  if (writes_.size() == from) return nullptr;
  absorb(from);
  return snapshot();
}

std::shared_ptr<LiveWrites::Chunk> LiveWrites::build_chunk(size_t slot, const std::vector<const LoggedWrite*>& writes) {
  const IndexView& view = base_->partitions[slot]->view();
  const DocId generation_end = static_cast<DocId>(view.meta.stats.doc_count);  // the generation's docIDs
  BuildOptions options;
  options.codec = view.meta.codec, options.bm25 = view.meta.bm25;
  IndexBuilder builder(options);
  auto chunk = std::make_shared<Chunk>();
  chunk->segment = std::make_shared<LiveSegment>();
  auto records = std::make_shared<std::vector<DocumentRecord>>();
  std::vector<std::string> tokens;
  for (const LoggedWrite* write : writes) {
    tokens.clear();
    for (const auto& [term, freq] : write->terms) tokens.insert(tokens.end(), freq, term);
    // No stored form: a fetch reads the write's own (LiveWrites::written), not a second copy.
    DocumentRecord record{write->id, write->title, write->url, write->length};
    builder.add_analyzed(record, tokens);
    records->push_back(std::move(record));
    chunk->segment->global.push_back(generation_end + static_cast<DocId>(write->sequence - base_->write_sequence));
    where_[write->id] = {chunk.get(), static_cast<uint32_t>(chunk->writes.size())};
    chunk->writes.push_back(write);
  }
  chunk->segment->records = std::move(records);
  chunk->deleted.assign(writes.size(), 0);
  if (builder.document_count() > 0)
    chunk->segment->view = std::make_shared<const IndexView>(std::move(builder.build().front().view));
  return chunk;
}

void LiveWrites::mark(std::string_view id) {
  if (auto it = where_.find(id); it != where_.end()) {  // written before, its copy in a segment
    auto [chunk, doc] = it->second;
    if (!chunk->deleted[doc]) chunk->deleted[doc] = 1, ++chunk->deleted_count;
    where_.erase(it);
    return;
  }
  if (latest_.count(id)) return;  // written before: the generation's copy is already masked
  for (size_t slot = 0; slot < ids_.size(); ++slot) {
    auto it = ids_[slot]->find(id);
    if (it != ids_[slot]->end()) base_deleted_[slot][it->second - base_->partitions[slot]->view().meta.doc_begin] = 1;
  }
}

void LiveWrites::absorb(size_t from) {
  if (from == writes_.size()) return;
  // The last write of each id among the new ones: earlier copies among them are never searched.
  std::unordered_map<std::string_view, const LoggedWrite*> last;
  for (size_t i = from; i < writes_.size(); ++i) {
    const LoggedWrite& write = writes_[i];
    if (!last.count(write.id)) mark(write.id);  // the copy before the new ones
    last[write.id] = &write;
    latest_[write.id] = write.sequence;
  }
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const PartitionMeta& meta = base_->partitions[slot]->view().meta;
    std::vector<const LoggedWrite*> puts;
    for (size_t i = from; i < writes_.size(); ++i) {
      const LoggedWrite& write = writes_[i];
      if (write.kind == LoggedWrite::Kind::kPut && last[write.id] == &write &&
          live_partition_of(write.id, meta.partition_count) == meta.partition_id)
        puts.push_back(&write);
    }
    auto& chunks = chunks_[slot];
    if (!puts.empty()) chunks.push_back(build_chunk(slot, puts));
    // Merged, the documents still searched: those not written again since.
    while (chunks.size() >= kFanIn &&
           tier(chunks[chunks.size() - kFanIn]->writes.size()) <= tier(chunks.back()->writes.size())) {
      std::vector<const LoggedWrite*> kept;
      for (size_t c = chunks.size() - kFanIn; c < chunks.size(); ++c)
        for (size_t d = 0; d < chunks[c]->writes.size(); ++d)
          if (!chunks[c]->deleted[d]) kept.push_back(chunks[c]->writes[d]);
      std::shared_ptr<Chunk> merged = build_chunk(slot, kept);  // where_ now points into it
      chunks.resize(chunks.size() - kFanIn);
      if (!merged->writes.empty()) chunks.push_back(std::move(merged));  // else every one written again since
    }
  }
  auto layer = std::make_shared<DfMap>();
  for (size_t i = from; i < writes_.size(); ++i)
    for (const auto& [term, value] : writes_[i].df) (*layer)[term] = value;
  df_layers_.push_back(std::move(layer));
  while (df_layers_.size() >= 2 && merge_due(df_layers_[df_layers_.size() - 2]->size(), df_layers_.back()->size())) {
    auto merged = std::make_shared<DfMap>(*df_layers_[df_layers_.size() - 2]);
    for (const auto& [term, value] : *df_layers_.back()) (*merged)[term] = value;  // the newer wins
    df_layers_.pop_back();
    df_layers_.back() = std::move(merged);
  }
}

LeafServer::WrittenCopy LiveWrites::written(std::string_view id) const {
  LeafServer::WrittenCopy copy;
  // What is served is the generation alone.
  if (writes_.empty() || waiting_for_generation() || base_->partitions.empty()) return copy;
  auto it = latest_.find(id);
  if (it == latest_.end() || it->second < writes_.front().sequence) return copy;
  const LoggedWrite& write = writes_[static_cast<size_t>(it->second - writes_.front().sequence)];
  copy.written = true;
  copy.put = write.kind == LoggedWrite::Kind::kPut;
  if (copy.put) {
    copy.partition = live_partition_of(write.id, base_->partitions.front()->view().meta.partition_count);
    copy.source = write.source;
  }
  return copy;
}

std::shared_ptr<const LoadedIndex> LiveWrites::snapshot() const {
  if (writes_.empty() || waiting_for_generation()) return base_;
  auto live = std::make_shared<LoadedIndex>();
  live->generation = base_->generation;
  live->write_sequence = writes_.back().sequence;
  live->analyzer = base_->analyzer;
  live->partitions = base_->partitions;
  live->gpu_only = base_->gpu_only, live->gpu_error = base_->gpu_error;
  const CollectionStats stats{writes_.back().doc_count, writes_.back().total_length};
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const IndexView& view = base_->partitions[slot]->view();
    auto overlay = std::make_shared<LiveOverlay>(make_overlay(view, stats, df_layers_));
    overlay->deleted = base_deleted_[slot];
    std::vector<OverlaidSegment> segments;
    live->live.emplace_back();
    for (const auto& chunk : chunks_[slot]) {
      auto segment_overlay = std::make_shared<LiveOverlay>(make_overlay(*chunk->segment->view, stats, df_layers_));
      if (chunk->deleted_count > 0) segment_overlay->deleted = chunk->deleted;
      segments.push_back({chunk->segment, std::move(segment_overlay)});
      live->live.back().push_back(chunk->segment);
    }
    if (slot < base_->gpu.size()) {  // the generation's GPU processor under the same overlay (held by base_)
      std::shared_ptr<QueryProcessor> gpu(base_, base_->gpu[slot].get());
      live->gpu.push_back(std::make_unique<LiveQueryProcessor>(std::move(gpu), overlay, segments, "gpu"));
    }
    live->cpu.push_back(
        std::make_shared<LiveQueryProcessor>(base_->cpu[slot], std::move(overlay), std::move(segments)));
  }
  return live;
}

}  // namespace warp
