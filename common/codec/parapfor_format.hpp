// ParaPFor (Ao et al. 2011 §4.1, Appendix G): per block of n values, a header word with b (slot
// width), hb (width of the exceptions' overflow), ib (width of the exception indices) and en (the
// exception count); n slots of b bits holding every value's low bits; en indices of ib bits,
// ascending; en overflows of hb bits. Exceptions are patched by en threads at once, and one value
// can be read alone (a binary search among the block's exception indices): Ao et al. Algorithm 1
// reads frequencies this way. endpoints[j] is the word offset of block j's header.
#pragma once
#include "common/codec/host_device.hpp"

namespace warp::parapfor {

struct BlockHeader {
  uint32_t b, hb, ib, en;
};

WARP_HD BlockHeader header(uint32_t word) { return {word & 63, (word >> 6) & 63, (word >> 12) & 15, word >> 16}; }
WARP_HD uint32_t header_word(uint32_t b, uint32_t hb, uint32_t ib, uint32_t en) {
  return b | (hb << 6) | (ib << 12) | (en << 16);
}
WARP_HD uint32_t packed(uint32_t n, uint32_t bits) { return (n * bits + 31) / 32; }

// The value at index t of the block starting at `at` (n values).
WARP_HD uint32_t value_at(const uint32_t* at, uint32_t n, uint32_t t) {
  const BlockHeader h = header(at[0]);
  uint32_t v = fmt::extract(at + 1, t, h.b);
  if (h.en == 0) return v;
  const uint32_t* indices = at + 1 + packed(n, h.b);
  uint32_t lo = 0, hi = h.en;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (fmt::extract(indices, mid, h.ib) < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < h.en && fmt::extract(indices, lo, h.ib) == t) {
    v |= fmt::extract(indices + packed(h.en, h.ib), lo, h.hb) << h.b;  // b < 32 when there are exceptions
  }
  return v;
}

}  // namespace warp::parapfor
