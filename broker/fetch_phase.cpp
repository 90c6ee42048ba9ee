#include "broker/fetch_phase.hpp"

namespace warp {

std::shared_ptr<const DocumentsPlan> plan_fetch(const std::vector<const BrokerHit*>& page, const SearchParams& params,
                                                const std::vector<QueryTerm>& terms,
                                                const std::vector<std::vector<std::string>>& phrases) {
  if (!params.fetches() || page.empty()) return nullptr;
  auto plan = std::make_shared<DocumentsPlan>();
  for (const BrokerHit* hit : page) plan->hits[hit->partition].emplace_back(hit->doc, std::string(hit->id));
  plan->source = params.source;
  if (!params.snippet.empty()) {
    for (const QueryTerm& term : terms) plan->terms.push_back(term.text);
    plan->phrases = phrases;
    plan->field = params.snippet;
    plan->length = static_cast<uint32_t>(params.snippet_length);
    plan->pre_tag = params.highlight_pre;
    plan->post_tag = params.highlight_post;
  }
  return plan;
}

FetchedDocuments::FetchedDocuments(const FanOutResult& result) {
  for (const PartitionOutcome& outcome : result.partitions) {
    if (outcome.status != "ok") partial_ = true;
    for (const FetchedHit& hit : outcome.fetched) by_hit_[{outcome.partition, hit.doc}] = &hit;
  }
}

const FetchedHit* FetchedDocuments::find(uint32_t partition, DocId doc) const {
  auto it = by_hit_.find({partition, doc});
  return it == by_hit_.end() ? nullptr : it->second;
}

void write_hit(JsonWriter& json, const BrokerHit& hit, const FetchedDocuments* fetched, const SearchParams& params) {
  json.begin_object().key("id").value(hit.id).key("score").value(static_cast<double>(hit.score));
  const FetchedHit* parts = fetched ? fetched->find(hit.partition, hit.doc) : nullptr;
  if (parts && parts->found) {
    if (!params.snippet.empty() && parts->has_snippet) json.key("snippet").value(parts->snippet);
    if (params.source && !parts->source.empty()) json.key("source").raw(parts->source);
  }
  json.key("title").value(hit.title).key("url").value(hit.url).end_object();
}

}  // namespace warp
