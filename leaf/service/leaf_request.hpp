// A request as the leaf's front ends read it (LeafServer::read_request): what both the ZeroMQ
// front end and the direct search path hand on, inline or through the workers' queue.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "leaf/query/query_processor.hpp"
#include "leaf/service/documents_request.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

struct LeafServer::Request {
  bool search = false;     // false (and not `documents`): `reply` holds the answer already (a status, an error)
  bool documents = false;  // a DocumentsRequest, `ask`, for a worker (RocksDB reads, snippets)
  DocumentsAsk ask;
  std::string reply;
  std::chrono::steady_clock::time_point arrival;
  std::shared_ptr<const LoadedIndex> index;  // the generation it reads, to the end
  // A search: its partition (slot in `index`), deadline budget and query, prepared on the
  // partition's view.
  uint64_t query_id = 0;
  uint32_t partition_id = 0;
  size_t slot = 0;
  std::chrono::microseconds budget{0};
  PreparedQuery query;
  uint64_t postings = 0;            // its terms' postings in the partition (the sum of their df)
  std::vector<std::string> facets;  // fields to count (facet_counts.hpp); none: no facets
  size_t facet_values = 10;
};

}  // namespace warp
