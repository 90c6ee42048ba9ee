// The search of one partition with the writes after its generation (docs/writes.md): the
// generation's lists under a LiveOverlay (today's statistics, the replaced and deleted documents
// kept out) beside a small in-memory segment of the documents written since that belong to the
// partition, merged into one top-k. The generation's part runs on its own processor (the CPU's, or
// the GPU's with the overlay's norms on the device), the segments on the CPU, all with the same
// float operations as a fresh build, so the answer is that build's: the same documents, the same
// scores, ties broken by docID where the segment's documents follow the generation's in write order.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "common/index/index_builder.hpp"
#include "leaf/query/cpu_query_processor.hpp"

namespace warp {

// A segment of written documents with its overlay (today's statistics, those replaced since).
struct OverlaidSegment {
  std::shared_ptr<const LiveSegment> segment;
  std::shared_ptr<const LiveOverlay> overlay;
};

class LiveQueryProcessor final : public QueryProcessor {
 public:
  // `base`: the generation's CPU processor of the partition; `overlay`: over its view; `segments`:
  // the partition's written documents, in write order.
  // `name`: the base processor's ("cpu", "gpu"): the segments are always searched on the CPU.
  LiveQueryProcessor(std::shared_ptr<QueryProcessor> base, std::shared_ptr<const LiveOverlay> overlay,
                     std::vector<OverlaidSegment> segments, std::string_view name = "cpu");
  std::string_view name() const override { return name_; }
  const IndexView& index() const override { return base_->index(); }
  using QueryProcessor::search;
  using QueryProcessor::search_batch;
  QueryResult search(const PreparedQuery& prepared) const override;
  // The queries' generation parts as one batch of the base processor (a GPU batch), in one or two
  // rounds (AND+OR's OR for those AND left short of k).
  std::vector<QueryResult> search_batch(std::span<const PreparedQuery> queries) const override;
  std::unique_ptr<BatchRun> start_batch(std::span<const PreparedQuery> queries) const override;
  DeviceMemoryStats device_memory() const override { return base_->device_memory(); }
  // The generation's documents under the overlay, then each segment's under its own.
  void count_facets(const PreparedQuery& prepared, bool any_term, FacetCounter& counter) const override;

 private:
  class BaseRun;
  std::vector<PreparedQuery> on_base(const std::vector<Query>& queries) const;  // under the overlay
  // The segments' hits merged into each query's answer from the generation.
  void add_segments(const std::vector<Query>& queries, std::vector<QueryResult>& results) const;
  std::vector<QueryResult> search_all(const std::vector<Query>& queries) const;
  std::shared_ptr<QueryProcessor> base_;
  std::shared_ptr<const LiveOverlay> overlay_;
  std::vector<OverlaidSegment> segments_;
  std::string_view name_;
  std::vector<std::unique_ptr<CpuQueryProcessor>> processors_;  // by segment, over its view
};

}  // namespace warp
