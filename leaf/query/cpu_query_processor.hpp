// The CPU query processor of one partition: DAAT over compressed blocks with block skipping
// (AND), tiled MaxScore, BlockMax-WAND or MaxScore (OR), and AND+OR (Ding et al. 2009 §8.3: AND first, OR when
// AND finds fewer than k documents).
#pragma once
#include "leaf/query/query_processor.hpp"

namespace warp {

struct CpuProcessorOptions {
  OrAlgorithm or_algorithm = OrAlgorithm::kTiles;
};

class CpuQueryProcessor final : public QueryProcessor {
 public:
  CpuQueryProcessor(const IndexView& index, CpuProcessorOptions options = {}) : index_(index), options_(options) {}
  std::string_view name() const override { return "cpu"; }
  QueryResult search(const Query& query) const override;

 private:
  const IndexView& index_;
  CpuProcessorOptions options_;
};

}  // namespace warp
