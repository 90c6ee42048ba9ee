// Fan-out of one query to one replica of every partition and collection of the per-partition
// top-k. A replica that fails, answers with an error or stays silent past its share of the
// deadline is replaced by another replica of the same partition while time remains; partitions
// that cannot answer in time are reported, and the result is flagged partial.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "broker/cluster.hpp"
#include "common/index/types.hpp"
#include "common/query/query.hpp"

namespace warp {

struct BrokerHit {
  DocId doc;
  float score;
  std::string id, title, url;
};

struct PartitionOutcome {
  uint32_t partition = 0;
  std::string status = "timeout";  // ok | error | timeout | unavailable
  std::string replica;             // the one that answered, or the last tried
  std::string error;
  int attempts = 0;
  double took_ms = 0;
  uint64_t and_matches = 0;
  std::vector<BrokerHit> hits;
};

struct FanOutResult {
  std::vector<PartitionOutcome> partitions;
  bool partial = false;
  int retries = 0;
};

// `terms`: the query's distinct terms with how often it holds each (sent as term counts).
FanOutResult fan_out(Cluster& cluster, const std::vector<QueryTerm>& terms, QueryMode mode, size_t k,
                     std::chrono::milliseconds timeout);

// The global top-k of the partitions' lists: higher score first, ties to the smaller docID.
std::vector<BrokerHit> merge_hits(const FanOutResult& result, size_t k);

}  // namespace warp
