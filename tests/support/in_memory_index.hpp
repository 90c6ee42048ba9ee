// Partitions built in memory, each searched by a CPU processor and merged, as IndexSearcher does
// (AND+OR decided over the whole collection), for the tests that compare rankings.
#pragma once
#include <memory>
#include <vector>

#include "common/index/index_builder.hpp"
#include "leaf/query/cpu_query_processor.hpp"

namespace warp::testing {

struct InMemoryIndex {
  std::vector<BuiltPartition> partitions;
  std::vector<std::unique_ptr<CpuQueryProcessor>> processors;

  InMemoryIndex(std::vector<BuiltPartition> built, OrAlgorithm algorithm) : partitions(std::move(built)) {
    for (auto& p : partitions)
      processors.push_back(std::make_unique<CpuQueryProcessor>(p.view, CpuProcessorOptions{algorithm}));
  }
  std::vector<Hit> search(const Query& query) const {
    // AND+OR is a whole-collection decision: count AND matches everywhere first.
    Query effective = query;
    if (query.mode == QueryMode::kAndOr) {
      Query and_query = query;
      and_query.mode = QueryMode::kAnd;
      uint64_t matches = 0;
      for (const auto& processor : processors) matches += processor->search(and_query).and_matches;
      effective.mode = matches >= query.k ? QueryMode::kAnd : QueryMode::kOr;
    }
    std::vector<std::vector<Hit>> lists;
    for (const auto& processor : processors) lists.push_back(processor->search(effective).hits);
    return merge_topk(std::move(lists), query.k);
  }
};

}  // namespace warp::testing
