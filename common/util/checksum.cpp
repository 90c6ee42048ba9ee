#include "common/util/checksum.hpp"

#include <zlib.h>

#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/util/status.hpp"

namespace warp {

namespace {

// Slicing-by-8 tables of the reflected CRC-32 (polynomial 0xEDB88320, zlib's): table[k][b] is the
// CRC of byte b followed by k zero bytes, so eight bytes fold in with eight lookups.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr auto kTables = make_tables();

// Below this many bytes the tables are faster than zlib, whose crc32 goes a byte at a time up to
// its word alignment and sets up its braids per call (0.4 GB/s on 8-67 byte inputs on the
// development VM, about what a posting list, a term or a lexicon row is); above it zlib's braided
// loop is (5 GB/s).
constexpr size_t kTablesBelow = 512;

uint32_t crc32_small(const unsigned char* p, size_t n, uint32_t seed) {
  uint32_t c = ~seed;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^ kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = kTables[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return ~c;
}

}  // namespace

static_assert(std::endian::native == std::endian::little, "the slicing tables read words little-endian");

uint32_t crc32_of(const void* data, size_t size, uint32_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size < kTablesBelow) return crc32_small(bytes, size, seed);
  uLong crc = seed;
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
