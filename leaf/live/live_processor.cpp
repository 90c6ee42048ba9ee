#include "leaf/live/live_processor.hpp"

#include <algorithm>

namespace warp {

LiveQueryProcessor::LiveQueryProcessor(std::shared_ptr<QueryProcessor> base, std::shared_ptr<const LiveOverlay> overlay,
                                       std::vector<OverlaidSegment> segments)
    : base_(std::move(base)), overlay_(std::move(overlay)), segments_(std::move(segments)) {
  for (const OverlaidSegment& s : segments_)
    processors_.push_back(std::make_unique<CpuQueryProcessor>(*s.segment->view));
}

namespace {
void add_stats(QueryResult& into, const QueryResult& from) {
  into.and_matches += from.and_matches;
  into.stats.postings_decoded += from.stats.postings_decoded;
  into.stats.blocks_decoded += from.stats.blocks_decoded;
  into.stats.blocks_total += from.stats.blocks_total;
}
}  // namespace

// One mode on all: the generation's lists under the overlay, each segment's under its own, merged.
QueryResult LiveQueryProcessor::search_all(const Query& query) const {
  PreparedQuery on_base;
  on_base.scoring = score_query(query, base_->index(), overlay_.get());
  on_base.query = query;
  on_base.index = &base_->index();
  on_base.live = overlay_.get();
  QueryResult result = base_->search(on_base);
  if (segments_.empty()) return result;
  std::vector<std::vector<Hit>> lists;
  lists.push_back(std::move(result.hits));
  for (size_t i = 0; i < segments_.size(); ++i) {
    const OverlaidSegment& s = segments_[i];
    PreparedQuery on_segment;
    on_segment.scoring = score_query(query, *s.segment->view, s.overlay.get());
    on_segment.query = query;
    on_segment.index = s.segment->view.get();
    on_segment.live = s.overlay.get();
    QueryResult added = processors_[i]->search(on_segment);
    for (Hit& hit : added.hits) hit.doc = s.segment->global[hit.doc];
    lists.push_back(std::move(added.hits));
    add_stats(result, added);
  }
  result.hits = merge_topk(std::move(lists), query.k);
  return result;
}

QueryResult LiveQueryProcessor::search(const PreparedQuery& prepared) const {
  const Query& query = prepared.query;
  if (query.mode != QueryMode::kAndOr) return search_all(query);
  // AND+OR as one partition: AND over the generation and the segment together, OR when together
  // they hold fewer than k.
  Query conjunctive = query;
  conjunctive.mode = QueryMode::kAnd;
  QueryResult result = search_all(conjunctive);
  if (result.hits.size() >= query.k) return result;
  Query disjunctive = query;
  disjunctive.mode = QueryMode::kOr;
  QueryResult fallback = search_all(disjunctive);
  fallback.and_matches = 0;
  add_stats(fallback, result);
  fallback.fell_back_to_or = true;
  return fallback;
}

}  // namespace warp
