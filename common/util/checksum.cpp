#include "common/util/checksum.hpp"

#include <zlib.h>

#include <fstream>
#include <vector>

#include "common/util/status.hpp"

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

uint32_t crc32_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32_of(buffer.data(), static_cast<size_t>(in.gcount()), crc);
  }
  return crc;
}

}  // namespace warp
