#include "common/codec/bit_packing.hpp"

#include <algorithm>
#include <array>

#include "common/codec/codec_impl.hpp"

#include <utility>

namespace warp {
namespace {

// 32 values of B bits fill exactly B words, so a group of 32 has compile-time offsets.
template <unsigned B>
void unpack_group32(const uint32_t* in, uint32_t* out) {
#pragma GCC unroll 32
  for (unsigned i = 0; i < 32; ++i) {
    constexpr uint32_t mask = B >= 32 ? ~0u : ((1u << B) - 1);
    const unsigned bit = i * B;
    const unsigned word = bit >> 5;
    const unsigned offset = bit & 31;
    uint32_t v = in[word] >> offset;
    if (offset + B > 32) v |= in[word + 1] << (32 - offset);
    out[i] = v & mask;
  }
}

template <unsigned B>
void unpack_fixed(const uint32_t* in, size_t n, uint32_t* out) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) unpack_group32<B>(in + (i / 32) * B, out + i);
  for (; i < n; ++i) out[i] = extract_bits(in, i, B);
}

template <unsigned... Bs>
void unpack_dispatch(std::integer_sequence<unsigned, Bs...>, const uint32_t* in, size_t n, unsigned bits,
                     uint32_t* out) {
  using Fn = void (*)(const uint32_t*, size_t, uint32_t*);
  static constexpr Fn table[] = {&unpack_fixed<Bs + 1>...};
  table[bits - 1](in, n, out);
}

// The packing side: 32 values of B bits fill exactly B words, written once each from a 64-bit
// accumulator whose fill is known at compile time (the generic loop below read, or-ed and wrote
// one or two words a value, its shifts and tests computed per value: 5% of a build's back end).
template <unsigned B>
void pack_group32(const uint32_t* in, uint32_t* out) {
  constexpr uint32_t mask = B >= 32 ? ~0u : ((1u << B) - 1);
  uint64_t acc = 0;
  unsigned filled = 0;
#pragma GCC unroll 32
  for (unsigned i = 0; i < 32; ++i) {
    acc |= static_cast<uint64_t>(in[i] & mask) << filled;
    filled += B;
    if (filled >= 32) {
      *out++ = static_cast<uint32_t>(acc);
      acc >>= 32;
      filled -= 32;
    }
  }
}

// Whole groups of 32 into `out` (zeroed, packed_words(n, B) words); the rest or-ed in value by value.
template <unsigned B>
void pack_fixed(const uint32_t* in, size_t n, uint32_t* out) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) pack_group32<B>(in + i, out + (i / 32) * B);
  constexpr uint32_t mask = B >= 32 ? ~0u : ((1u << B) - 1);
  for (; i < n; ++i) {
    const size_t bit = i * B;
    const size_t word = bit >> 5;
    const unsigned offset = bit & 31;
    const uint64_t v = static_cast<uint64_t>(in[i] & mask) << offset;
    out[word] |= static_cast<uint32_t>(v);
    if (offset + B > 32) out[word + 1] |= static_cast<uint32_t>(v >> 32);
  }
}

template <unsigned... Bs>
void pack_dispatch(std::integer_sequence<unsigned, Bs...>, const uint32_t* in, size_t n, unsigned bits, uint32_t* out) {
  using Fn = void (*)(const uint32_t*, size_t, uint32_t*);
  static constexpr Fn table[] = {&pack_fixed<Bs + 1>...};
  table[bits - 1](in, n, out);
}

}  // namespace

void pack_bits(const uint32_t* in, size_t n, unsigned bits, std::vector<uint32_t>& out) {
  size_t base = out.size();
  out.resize(base + packed_words(n, bits), 0);
  if (bits == 0) return;
  pack_dispatch(std::make_integer_sequence<unsigned, 32>{}, in, n, std::min(bits, 32u), out.data() + base);
}

PatchWidth cheapest_patch_width(const uint32_t* block, size_t n, unsigned per_exception_bits) {
  std::array<uint32_t, 33> count_by_width{};
  PatchWidth best;
  for (size_t i = 0; i < n; ++i) {
    const unsigned w = bit_width32(block[i]);
    ++count_by_width[w];
    best.max_width = std::max(best.max_width, w);
  }
  best.b = best.max_width;
  size_t best_cost = n * best.max_width, exceptions = 0;
  for (int w = static_cast<int>(best.max_width) - 1; w >= 0; --w) {
    exceptions += count_by_width[w + 1];
    const size_t cost = n * w + exceptions * (per_exception_bits + best.max_width - w);
    if (cost < best_cost) best_cost = cost, best.b = static_cast<unsigned>(w);
  }
  return best;
}

void unpack_bits(const uint32_t* in, size_t n, unsigned bits, uint32_t* out) {
  if (bits == 0) {
    for (size_t i = 0; i < n; ++i) out[i] = 0;
    return;
  }
  unpack_dispatch(std::make_integer_sequence<unsigned, 32>{}, in, n, bits, out);
}

}  // namespace warp
