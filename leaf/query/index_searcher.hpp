// Searches every partition of an index and merges their top-k into the global top-k. Partitions
// share collection-wide statistics, so merged scores equal those of a single-partition index.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/index/partition_store.hpp"
#include "leaf/query/cpu_query_processor.hpp"

namespace warp {

// Makes the processor of one partition (CPU by default; warp-search --processor gpu passes the GPU's).
using ProcessorFactory = std::function<std::unique_ptr<QueryProcessor>(const IndexView&)>;

class IndexSearcher {
 public:
  IndexSearcher(std::vector<std::unique_ptr<Partition>> partitions, CpuProcessorOptions options = {});
  IndexSearcher(std::vector<std::unique_ptr<Partition>> partitions, const ProcessorFactory& make_processor);
  // Thread-safe.
  QueryResult search(const Query& query) const;
  const std::string& external_id(DocId doc) const;
  const std::vector<std::unique_ptr<Partition>>& partitions() const { return partitions_; }
  const std::string& analyzer_version() const { return partitions_.front()->view().meta.analyzer_version; }

 private:
  std::vector<std::unique_ptr<Partition>> partitions_;  // ordered by doc_begin
  std::vector<std::unique_ptr<QueryProcessor>> processors_;
};

}  // namespace warp
