// The fetch phase of a search (Elasticsearch's query then fetch): once the partitions' top lists
// are merged, the page's hits alone are sent back to the partitions that hold them for their
// stored documents and snippets (a DocumentsRequest each; leaf/service/documents_request.hpp), so
// a leaf never reads or highlights a candidate that does not make the page.
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "broker/fan_out.hpp"
#include "broker/search_params.hpp"
#include "common/util/json_writer.hpp"

namespace warp {

// What to fetch for `page` (the hits shown); null where `params` asks for nothing or the page is
// empty.
std::shared_ptr<const DocumentsPlan> plan_fetch(const std::vector<const BrokerHit*>& page, const SearchParams& params,
                                                const std::vector<QueryTerm>& terms,
                                                const std::vector<std::vector<std::string>>& phrases = {});

// A fetch's documents by the hit they answer.
class FetchedDocuments {
 public:
  explicit FetchedDocuments(const FanOutResult& result);
  const FetchedHit* find(uint32_t partition, DocId doc) const;
  bool partial() const { return partial_; }  // a partition did not answer: its hits lack their parts

 private:
  std::map<std::pair<uint32_t, DocId>, const FetchedHit*> by_hit_;
  bool partial_ = false;
};

// One hit's object: id, score, with `fetched` its snippet and stored document where asked, title
// and url (keys in byte order).
void write_hit(JsonWriter& json, const BrokerHit& hit, const FetchedDocuments* fetched, const SearchParams& params);

}  // namespace warp
