// Fixed-width bit packing into 32-bit words, LSB first: value i occupies bits [i*b, (i+1)*b).
// The layout of GPU-BP (Mallia et al. 2019), so one GPU thread extracts one value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace warp {

// Bits needed for v (0 for 0).
inline unsigned bit_width32(uint32_t v) { return v == 0 ? 0 : 32 - __builtin_clz(v); }
inline uint32_t low_mask(unsigned bits) { return bits >= 32 ? ~0u : ((1u << bits) - 1); }
inline size_t packed_words(size_t n, unsigned bits) { return (n * bits + 31) / 32; }

// Appends packed_words(n, bits) words holding the low `bits` bits of in[0..n).
void pack_bits(const uint32_t* in, size_t n, unsigned bits, std::vector<uint32_t>& out);
// Unpacks n values of `bits` bits starting at bit 0 of `in`.
void unpack_bits(const uint32_t* in, size_t n, unsigned bits, uint32_t* out);

// Random access to value `index` (Ao et al.'s element-wise access relies on this).
inline uint32_t extract_bits(const uint32_t* in, size_t index, unsigned bits) {
  if (bits == 0) return 0;
  size_t bit = index * bits;
  size_t word = bit >> 5;
  unsigned offset = bit & 31;
  uint64_t window = in[word];
  if (offset + bits > 32) window |= static_cast<uint64_t>(in[word + 1]) << 32;
  return static_cast<uint32_t>(window >> offset) & low_mask(bits);
}

}  // namespace warp
