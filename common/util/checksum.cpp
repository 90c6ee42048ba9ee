#include "common/util/checksum.hpp"

#include <zlib.h>

namespace warp {

uint32_t crc32_of(const void* data, size_t size, uint32_t seed) {
  uLong crc = seed;
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    uInt chunk = size > (1u << 30) ? (1u << 30) : static_cast<uInt>(size);
    crc = crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace warp
