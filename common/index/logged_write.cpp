#include "common/index/logged_write.hpp"

namespace warp {

uint32_t live_partition_of(const std::string& id, uint32_t partition_count) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return partition_count == 0 ? 0 : static_cast<uint32_t>(hash % partition_count);
}

}  // namespace warp
