// Errors as values with a message a user can act on (RocksDB's Status habit).
#pragma once
#include <stdexcept>
#include <string>

namespace warp {

// Thrown at boundaries (files, partitions, input records) where the caller cannot go on.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace warp
