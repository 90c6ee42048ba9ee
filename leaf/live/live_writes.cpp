#include "leaf/live/live_writes.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
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
  if (!writes_.empty()) return writes_.back()->sequence;
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
  // The merges done are taken in; those under way are left to end on their own (they read only
  // what they hold), their segments kept as they are: a swap waits for no merge.
  if (!hold_merges_) take_merges(false);
  drop_merges();
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
      same_partitions && !writes_.empty() && writes_.front()->sequence <= held + 1 && writes_.back()->sequence > held;
  if (keep) {
    for (size_t slot = 0; slot < chunks_.size(); ++slot) {
      const DocId generation_end = static_cast<DocId>(base_->partitions[slot]->view().meta.stats.doc_count);
      std::vector<std::shared_ptr<Chunk>> kept;
      for (const auto& chunk : chunks_[slot]) {
        auto copy = std::make_shared<Chunk>(*chunk);
        copy->segment = std::make_shared<LiveSegment>(*chunk->segment);
        for (size_t d = 0; d < copy->writes.size(); ++d) {
          // A write an earlier generation held is gone (its document masked since): no sequence to read.
          const uint64_t sequence = copy->writes[d] ? copy->writes[d]->sequence : 0;
          if (sequence <= held && !copy->deleted[d]) copy->deleted[d] = 1, ++copy->deleted_count;
          if (sequence <= held) copy->writes[d] = nullptr;  // the writes it holds go below
          copy->segment->global[d] = generation_end + static_cast<DocId>(sequence > held ? sequence - held : 0);
        }
        if (copy->deleted_count < copy->writes.size()) kept.push_back(std::move(copy));
      }
      chunks_[slot] = std::move(kept);
    }
  }
  while (!writes_.empty() && writes_.front()->sequence <= held) writes_.pop_front();
  if (!writes_.empty() && writes_.front()->sequence != held + 1) writes_.clear();  // a gap
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
  for (const auto& write : writes_) latest_[write->id] = write->sequence;
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
    drop_merges();
    writes_.clear();
    reset();
    return snapshot();
  }
  if (waiting_for_generation()) return nullptr;
  const bool merged = !hold_merges_ && take_merges(false);
  std::erase_if(dropped_, [](const std::future<std::shared_ptr<Chunk>>& merge) {
    return merge.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  const size_t from = writes_.size();
  for (const LoggedWrite& write : answer.writes)
    if (write.sequence == after() + 1) writes_.push_back(std::make_shared<const LoggedWrite>(write));
  if (writes_.size() == from) {
    if (!merged) return nullptr;
    for (size_t slot = 0; slot < chunks_.size(); ++slot) start_merges(slot);
    return snapshot();
  }
  absorb(from);
  return snapshot();
}

std::shared_ptr<const LoadedIndex> LiveWrites::settle() {
  if (!take_merges(true)) return nullptr;
  return snapshot();
}

bool LiveWrites::take_merges(bool wait) {
  bool took = false;
  for (auto merge = merges_.begin(); merge != merges_.end();) {
    if (!wait && merge->merged.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++merge;
      continue;
    }
    std::shared_ptr<Chunk> merged;
    try {
      merged = merge->merged.get();
    } catch (const std::exception& e) {  // the segments stay as they were
      std::fprintf(stderr, "warp-leaf: a merge of written documents' segments failed: %s\n", e.what());
      for (const auto& chunk : merge->sources) chunk->merging = false;
      merge = merges_.erase(merge);
      continue;
    }
    // What was written again while it ran is masked in it; the rest is found in it from now on.
    for (size_t d = 0; d < merge->origin.size(); ++d) {
      const auto [chunk, doc] = merge->origin[d];
      if (chunk->deleted[doc])
        merged->deleted[d] = 1, ++merged->deleted_count;
      else
        where_[chunk->writes[doc]->id] = {merged.get(), static_cast<uint32_t>(d)};
    }
    auto& chunks = chunks_[merge->slot];
    const auto first = std::find(chunks.begin(), chunks.end(), merge->sources.front());
    const auto last = first + static_cast<std::ptrdiff_t>(merge->sources.size());
    if (merged->deleted_count == merged->writes.size()) {
      chunks.erase(first, last);
    } else {
      *first = std::move(merged);
      chunks.erase(first + 1, last);
    }
    took = true;
    merge = merges_.erase(merge);
  }
  return took;
}

void LiveWrites::start_merges(size_t slot) {
  // Every run of kFanIn consecutive segments of one tier (none in a merge under way) is merged,
  // anywhere in the list: merges end at any time, so the tiers are not only at its end.
  auto& chunks = chunks_[slot];
  for (size_t i = 0; i + kFanIn <= chunks.size();) {
    size_t busy = kFanIn;  // the last of the window in a merge under way
    for (size_t c = 0; c < kFanIn; ++c)
      if (chunks[i + c]->merging) busy = c;
    if (busy < kFanIn) {
      i += busy + 1;
      continue;
    }
    if (tier(chunks[i]->writes.size()) > tier(chunks[i + kFanIn - 1]->writes.size())) {
      ++i;
      continue;
    }
    Merge merge;
    merge.slot = slot;
    merge.sources.assign(chunks.begin() + static_cast<std::ptrdiff_t>(i),
                         chunks.begin() + static_cast<std::ptrdiff_t>(i + kFanIn));
    Writes kept;  // the documents still searched: those not written again since
    for (const auto& chunk : merge.sources)
      for (size_t d = 0; d < chunk->writes.size(); ++d)
        if (!chunk->deleted[d]) kept.push_back(chunk->writes[d]), merge.origin.emplace_back(chunk.get(), d);
    if (kept.empty()) {  // every one written again since
      chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(i),
                   chunks.begin() + static_cast<std::ptrdiff_t>(i + kFanIn));
      continue;
    }
    for (const auto& chunk : merge.sources) chunk->merging = true;
    // The merge holds what it reads (the generation, the writes): it may outlive a swap.
    merge.merged = std::async(std::launch::async,
                              [base = base_, slot, kept = std::move(kept)] { return build_chunk(*base, slot, kept); });
    merges_.push_back(std::move(merge));
    i += kFanIn;
  }
}

void LiveWrites::drop_merges() {
  for (Merge& merge : merges_) {
    for (const auto& chunk : merge.sources) chunk->merging = false;
    dropped_.push_back(std::move(merge.merged));
  }
  merges_.clear();
}

std::shared_ptr<LiveWrites::Chunk> LiveWrites::build_chunk(const LoadedIndex& base, size_t slot, const Writes& writes) {
  const IndexView& view = base.partitions[slot]->view();
  const DocId generation_end = static_cast<DocId>(view.meta.stats.doc_count);  // the generation's docIDs
  BuildOptions options;
  options.codec = view.meta.codec, options.bm25 = view.meta.bm25;
  // The generation's columns, made of the written documents' sources (the builder's copies only).
  if (view.columns) options.columns = view.columns->schema(), options.store = false;
  // Its word positions too: of the words in order the indexer analyzed (the tokens it sends), or,
  // from an indexer that sends none, of the sources analyzed as the generation's were.
  const bool tokens = std::all_of(writes.begin(), writes.end(),
                                  [](const auto& write) { return write->tokens.size() == write->length; });
  if (view.positions) {
    options.analyzer = AnalyzerConfig::from_version(view.meta.analyzer_version);
    if (!tokens) options.positions = true, options.store = false;
  }
  const bool sources = options.keeps_sources();
  IndexBuilder builder(options);
  auto chunk = std::make_shared<Chunk>();
  chunk->segment = std::make_shared<LiveSegment>();
  auto records = std::make_shared<std::vector<DocumentRecord>>();
  for (const auto& write : writes) {
    // No stored form: a fetch reads the write's own (LiveWrites::written), not a second copy.
    DocumentRecord record{write->id, write->title, write->url, write->length};
    builder.add_counted(
        sources ? DocumentRecord{record.external_id, record.title, record.url, record.length, write->source} : record,
        write->terms);
    records->push_back(std::move(record));
    chunk->segment->global.push_back(generation_end + static_cast<DocId>(write->sequence - base.write_sequence));
    chunk->writes.push_back(write);
  }
  chunk->segment->records = std::move(records);
  chunk->deleted.assign(writes.size(), 0);
  if (builder.document_count() > 0) {
    IndexView built = std::move(builder.build().front().view);
    if (view.positions && tokens)
      built.positions = positions_of(options.analyzer, built.meta.doc_begin, built.doc_lengths,
                                     [&](DocId doc, PositionsBuilder& positions) {
                                       const LoggedWrite& write = *writes[doc - built.meta.doc_begin];
                                       positions.add_tokens(doc, write.terms, write.tokens, write.title_tokens);
                                     });
    chunk->segment->view = std::make_shared<const IndexView>(std::move(built));
  }
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
  // The new writes' layer of document frequencies (and the layers' merges) on a thread of its own,
  // beside the segments' indexing: it reads only the writes.
  auto df_layers = std::async(std::launch::async, [this, from, layers = df_layers_]() mutable {
    auto layer = std::make_shared<DfMap>();
    for (size_t i = from; i < writes_.size(); ++i)
      for (const auto& [term, value] : writes_[i]->df) (*layer)[term] = value;
    layers.push_back(std::move(layer));
    while (layers.size() >= 2 && merge_due(layers[layers.size() - 2]->size(), layers.back()->size())) {
      auto merged = std::make_shared<DfMap>(*layers[layers.size() - 2]);
      for (const auto& [term, value] : *layers.back()) (*merged)[term] = value;  // the newer wins
      layers.pop_back();
      layers.back() = std::move(merged);
    }
    return layers;
  });
  // The last write of each id among the new ones: earlier copies among them are never searched.
  std::unordered_map<std::string_view, const LoggedWrite*> last;
  for (size_t i = from; i < writes_.size(); ++i) {
    const LoggedWrite& write = *writes_[i];
    if (!last.count(write.id)) mark(write.id);  // the copy before the new ones
    last[write.id] = &write;
    latest_[write.id] = write.sequence;
  }
  for (size_t slot = 0; slot < base_->partitions.size(); ++slot) {
    const PartitionMeta& meta = base_->partitions[slot]->view().meta;
    Writes puts;
    for (size_t i = from; i < writes_.size(); ++i) {
      const LoggedWrite& write = *writes_[i];
      if (write.kind == LoggedWrite::Kind::kPut && last[write.id] == &write &&
          live_partition_of(write.id, meta.partition_count) == meta.partition_id)
        puts.push_back(writes_[i]);
    }
    if (!puts.empty()) {
      std::shared_ptr<Chunk> chunk = build_chunk(*base_, slot, puts);
      for (size_t d = 0; d < chunk->writes.size(); ++d)
        where_[chunk->writes[d]->id] = {chunk.get(), static_cast<uint32_t>(d)};
      chunks_[slot].push_back(std::move(chunk));
    }
    start_merges(slot);
  }
  df_layers_ = df_layers.get();
}

LeafServer::WrittenCopy LiveWrites::written(std::string_view id) const {
  LeafServer::WrittenCopy copy;
  // What is served is the generation alone.
  if (writes_.empty() || waiting_for_generation() || base_->partitions.empty()) return copy;
  auto it = latest_.find(id);
  if (it == latest_.end() || it->second < writes_.front()->sequence) return copy;
  const LoggedWrite& write = *writes_[static_cast<size_t>(it->second - writes_.front()->sequence)];
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
  live->write_sequence = writes_.back()->sequence;
  live->analyzer = base_->analyzer;
  live->partitions = base_->partitions;
  live->gpu_only = base_->gpu_only, live->gpu_error = base_->gpu_error;
  const CollectionStats stats{writes_.back()->doc_count, writes_.back()->total_length};
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
