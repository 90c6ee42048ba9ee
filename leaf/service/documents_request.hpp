// The leaf's answer to a DocumentsRequest (common/protocol/search.capnp): the fetch phase of a
// search, for the final page's hits of one partition, and the read of a document by id. Each
// document's stored form is read from the partition's stored family or, for one written since the
// generation, from its write; the snippet is built here, beside the text, so only the passage
// travels. A docID whose external id is not the one asked for (the leaf swapped generations since
// the search, or another replica answers) is looked up by id, as a read by id is: the last write
// through the API the leaf serves decides, else the generation's copy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "leaf/fetch/snippet.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

struct DocumentsAsk {
  std::vector<DocId> docs;       // empty: look up `ids`
  std::vector<std::string> ids;  // each doc's external id, or the ids to look up
  bool source = false;
  std::vector<std::string> terms;  // analyzed query terms; empty: no snippet
  std::string field = "body";
  SnippetOptions snippet;
};

// The reply (a LeafReply frame) for partition `slot` of `index`; `written` as LeafServer::written.
std::string documents_reply(const LoadedIndex& index, size_t slot, uint64_t query_id, uint32_t partition_id,
                            const DocumentsAsk& ask,
                            const std::function<LeafServer::WrittenCopy(std::string_view)>& written);

}  // namespace warp
