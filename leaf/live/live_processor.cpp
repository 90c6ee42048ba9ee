#include "leaf/live/live_processor.hpp"

#include <algorithm>

#include "leaf/query/facet_counts.hpp"

namespace warp {

LiveQueryProcessor::LiveQueryProcessor(std::shared_ptr<QueryProcessor> base, std::shared_ptr<const LiveOverlay> overlay,
                                       std::vector<OverlaidSegment> segments, std::string_view name)
    : base_(std::move(base)), overlay_(std::move(overlay)), segments_(std::move(segments)), name_(name) {
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

void LiveQueryProcessor::count_facets(const PreparedQuery& prepared, bool any_term, FacetCounter& counter) const {
  counter.count(prepared.query, any_term, base_->index(), overlay_->deleted);
  for (const OverlaidSegment& s : segments_)
    counter.count(prepared.query, any_term, *s.segment->view, s.overlay->deleted);
}

std::vector<PreparedQuery> LiveQueryProcessor::on_base(const std::vector<Query>& queries) const {
  std::vector<PreparedQuery> prepared(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    prepared[i].scoring = score_query(queries[i], base_->index(), overlay_.get());
    prepared[i].query = queries[i];
    prepared[i].index = &base_->index();
    prepared[i].live = overlay_.get();
  }
  return prepared;
}

void LiveQueryProcessor::add_segments(const std::vector<Query>& queries, std::vector<QueryResult>& results) const {
  if (segments_.empty()) return;
  for (size_t q = 0; q < queries.size(); ++q) {
    std::vector<std::vector<Hit>> lists;
    lists.push_back(std::move(results[q].hits));
    for (size_t i = 0; i < segments_.size(); ++i) {
      const OverlaidSegment& s = segments_[i];
      PreparedQuery on_segment;
      on_segment.scoring = score_query(queries[q], *s.segment->view, s.overlay.get());
      on_segment.query = queries[q];
      on_segment.index = s.segment->view.get();
      on_segment.live = s.overlay.get();
      QueryResult added = processors_[i]->search(on_segment);
      for (Hit& hit : added.hits) hit.doc = s.segment->global[hit.doc];
      lists.push_back(std::move(added.hits));
      add_stats(results[q], added);
    }
    results[q].hits = merge_topk(std::move(lists), queries[q].k);
  }
}

// One mode a query on all: the generation's lists under the overlay (the queries together, as the
// base processor batches them), each segment's under its own, merged.
std::vector<QueryResult> LiveQueryProcessor::search_all(const std::vector<Query>& queries) const {
  const std::vector<PreparedQuery> prepared = on_base(queries);
  std::vector<QueryResult> results = base_->search_batch(std::span<const PreparedQuery>(prepared));
  add_segments(queries, results);
  return results;
}

QueryResult LiveQueryProcessor::search(const PreparedQuery& prepared) const {
  return search_batch(std::span<const PreparedQuery>(&prepared, 1))[0];
}

std::vector<QueryResult> LiveQueryProcessor::search_batch(std::span<const PreparedQuery> queries) const {
  // AND+OR as one partition: AND over the generation and the segments together, then OR for those
  // that together hold fewer than k.
  std::vector<Query> first;
  for (const PreparedQuery& prepared : queries) {
    first.push_back(prepared.query);
    if (first.back().mode == QueryMode::kAndOr) first.back().mode = QueryMode::kAnd;
  }
  std::vector<QueryResult> results = search_all(first);
  std::vector<size_t> again;
  std::vector<Query> disjunctive;
  for (size_t q = 0; q < queries.size(); ++q) {
    if (queries[q].query.mode != QueryMode::kAndOr || results[q].hits.size() >= queries[q].query.k) continue;
    again.push_back(q);
    disjunctive.push_back(queries[q].query);
    disjunctive.back().mode = QueryMode::kOr;
  }
  if (again.empty()) return results;
  std::vector<QueryResult> fallbacks = search_all(disjunctive);
  for (size_t i = 0; i < again.size(); ++i) {
    QueryResult& fallback = fallbacks[i];
    fallback.and_matches = 0;
    add_stats(fallback, results[again[i]]);
    fallback.fell_back_to_or = true;
    results[again[i]] = std::move(fallback);
  }
  return results;
}

// A batch of one mode each (no AND+OR) started on the base processor as it starts batches (a GPU
// batch in flight, polled by the caller), the segments searched and merged when it is taken.
class LiveQueryProcessor::BaseRun final : public BatchRun {
 public:
  BaseRun(const LiveQueryProcessor& self, std::vector<Query> queries)
      : self_(self), queries_(std::move(queries)), prepared_(self.on_base(queries_)) {
    run_ = self_.base_->start_batch(std::span<const PreparedQuery>(prepared_));
  }
  bool poll() override { return run_->poll(); }
  std::vector<QueryResult> take() override {
    std::vector<QueryResult> results = run_->take();
    self_.add_segments(queries_, results);
    return results;
  }
  double between_phases_seconds() const override { return run_->between_phases_seconds(); }

 private:
  const LiveQueryProcessor& self_;
  std::vector<Query> queries_;
  std::vector<PreparedQuery> prepared_;  // before run_: the run reads them until it ends
  std::unique_ptr<BatchRun> run_;
};

std::unique_ptr<BatchRun> LiveQueryProcessor::start_batch(std::span<const PreparedQuery> queries) const {
  // AND+OR needs the AND's answers over everything before its OR: answered whole on a thread.
  const bool and_or = std::any_of(queries.begin(), queries.end(),
                                  [](const PreparedQuery& q) { return q.query.mode == QueryMode::kAndOr; });
  if (and_or) return run_on_thread([this, queries] { return search_batch(queries); });
  std::vector<Query> plain;
  for (const PreparedQuery& prepared : queries) plain.push_back(prepared.query);
  return std::make_unique<BaseRun>(*this, std::move(plain));
}

}  // namespace warp
