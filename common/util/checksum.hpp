// CRC-32 (zlib polynomial) used for partition checksums.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace warp {

uint32_t crc32_of(const void* data, size_t size, uint32_t seed = 0);
// The CRC-32 of a whole file, read in 1 MiB pieces; throws Error if it cannot be read.
uint32_t crc32_of_file(const std::string& path);
inline uint32_t crc32_of(std::string_view bytes, uint32_t seed = 0) {
  return crc32_of(bytes.data(), bytes.size(), seed);
}

}  // namespace warp
