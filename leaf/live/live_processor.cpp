#include "leaf/live/live_processor.hpp"

#include <algorithm>

namespace warp {

LiveQueryProcessor::LiveQueryProcessor(std::shared_ptr<QueryProcessor> base, std::shared_ptr<const LiveOverlay> overlay,
                                       std::shared_ptr<const LiveSegment> segment,
                                       std::shared_ptr<const LiveOverlay> segment_overlay)
    : base_(std::move(base)),
      overlay_(std::move(overlay)),
      segment_(std::move(segment)),
      segment_overlay_(std::move(segment_overlay)) {
  if (segment_->view) segment_processor_ = std::make_unique<CpuQueryProcessor>(*segment_->view);
}

// One mode on both: the generation's lists under the overlay, the segment's under its own, merged.
QueryResult LiveQueryProcessor::search_both(const Query& query) const {
  PreparedQuery on_base;
  on_base.scoring = score_query(query, base_->index(), overlay_.get());
  on_base.query = query;
  on_base.index = &base_->index();
  on_base.live = overlay_.get();
  QueryResult result = base_->search(on_base);
  if (!segment_processor_) return result;
  PreparedQuery on_segment;
  on_segment.scoring = score_query(query, *segment_->view, segment_overlay_.get());
  on_segment.query = query;
  on_segment.index = segment_->view.get();
  on_segment.live = segment_overlay_.get();
  QueryResult added = segment_processor_->search(on_segment);
  for (Hit& hit : added.hits) hit.doc = segment_->global[hit.doc];
  result.hits = merge_topk({std::move(result.hits), std::move(added.hits)}, query.k);
  result.and_matches += added.and_matches;
  result.stats.postings_decoded += added.stats.postings_decoded;
  result.stats.blocks_decoded += added.stats.blocks_decoded;
  result.stats.blocks_total += added.stats.blocks_total;
  return result;
}

QueryResult LiveQueryProcessor::search(const PreparedQuery& prepared) const {
  const Query& query = prepared.query;
  if (query.mode != QueryMode::kAndOr) return search_both(query);
  // AND+OR as one partition: AND over the generation and the segment together, OR when together
  // they hold fewer than k.
  Query conjunctive = query;
  conjunctive.mode = QueryMode::kAnd;
  QueryResult result = search_both(conjunctive);
  if (result.hits.size() >= query.k) return result;
  Query disjunctive = query;
  disjunctive.mode = QueryMode::kOr;
  QueryResult fallback = search_both(disjunctive);
  fallback.and_matches = result.and_matches;
  fallback.fell_back_to_or = true;
  fallback.stats.postings_decoded += result.stats.postings_decoded;
  fallback.stats.blocks_decoded += result.stats.blocks_decoded;
  fallback.stats.blocks_total += result.stats.blocks_total;
  return fallback;
}

}  // namespace warp
