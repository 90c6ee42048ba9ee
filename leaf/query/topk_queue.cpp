#include "leaf/query/topk_queue.hpp"

namespace warp {

std::vector<Hit> merge_topk(std::vector<std::vector<Hit>> lists, size_t k) {
  std::vector<Hit> all;
  for (auto& list : lists) all.insert(all.end(), list.begin(), list.end());
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), ranks_before);
  all.resize(keep);
  return all;
}

}  // namespace warp
