#include "leaf/query/index_searcher.hpp"

#include <algorithm>

#include "common/util/status.hpp"

namespace warp {

IndexSearcher::IndexSearcher(std::vector<std::unique_ptr<Partition>> partitions, CpuProcessorOptions options)
    : IndexSearcher(std::move(partitions), [options](const IndexView& view) -> std::unique_ptr<QueryProcessor> {
        return std::make_unique<CpuQueryProcessor>(view, options);
      }) {}

IndexSearcher::IndexSearcher(std::vector<std::unique_ptr<Partition>> partitions, const ProcessorFactory& make_processor)
    : partitions_(std::move(partitions)) {
  if (partitions_.empty()) throw Error("an index needs at least one partition");
  for (const auto& partition : partitions_) processors_.push_back(make_processor(partition->view()));
}

QueryResult IndexSearcher::search(const Query& query) const {
  if (processors_.size() == 1) return processors_.front()->search(query);
  QueryResult merged;
  std::vector<std::vector<Hit>> lists;
  bool all_and = true;
  for (const auto& processor : processors_) {
    QueryResult part = processor->search(query);
    merged.stats.blocks_decoded += part.stats.blocks_decoded;
    merged.stats.blocks_total += part.stats.blocks_total;
    merged.stats.postings_decoded += part.stats.postings_decoded;
    merged.and_matches += part.and_matches;
    all_and = all_and && !part.fell_back_to_or;
    lists.push_back(std::move(part.hits));
  }
  // AND+OR decides on the whole collection: OR only when AND finds fewer than k overall. A
  // partition with fewer than k AND matches fell back to OR on its own; if the collection as a
  // whole has k, answer AND everywhere. (If it has fewer, every partition fell back.)
  if (query.mode == QueryMode::kAndOr && !all_and && merged.and_matches >= query.k) {
    Query and_query = query;
    and_query.mode = QueryMode::kAnd;
    return search(and_query);
  }
  merged.fell_back_to_or = !all_and;
  merged.hits = merge_topk(std::move(lists), query.k);
  return merged;
}

const std::string& IndexSearcher::external_id(DocId doc) const {
  auto it = std::upper_bound(partitions_.begin(), partitions_.end(), doc,
                             [](DocId d, const auto& p) { return d < p->view().meta.doc_begin; });
  if (it == partitions_.begin()) throw Error("docID " + std::to_string(doc) + " is outside the index");
  const IndexView& view = (*--it)->view();
  if (doc >= view.meta.doc_end) throw Error("docID " + std::to_string(doc) + " is outside the index");
  return view.external_ids[doc - view.meta.doc_begin];
}

}  // namespace warp
