// The warp-per-block Rice decoder (warp_decode.cuh's overview).
#pragma once
#include <cstdint>

#include "leaf/gpu/decode/warp_primitives.cuh"

namespace warp::gpu {

// Rice: the block's unary range [start, end) holds exactly n zeros, the ends of its n codes; code
// i's quotient is the number of ones between zero i - 1 and zero i. The range is read in rounds
// from `origin` (start rounded down to a byte): each lane takes W bits of a round (W = 8 where the
// range fits 256 bits, as the frequencies' mostly do, else 16: one round for almost every block),
// counts its zeros, and a warp prefix sum of the counts ranks them; the lane writes each of its
// zeros' bit positions to the scratch at its rank (W predicated stores, no loop over a word's
// zeros). Each lane then reads the positions of its four codes' ends and of the code before, and
// the differences are the quotients.
// Decoding is split in two so that a block's docIDs and frequencies issue all their loads (header,
// first-round unary words, binary parts) before either waits on one: rice_issue for both, then
// the rest (no branch between the loads, so the compiler can hoist them all). On the H100 this
// took the whole-list decode from 43-44% to 51-52% of copy bandwidth: latency, not instructions,
// held it (fewer registers for more resident warps measured slower: 45-49%).
struct RiceBlock {
  const uint32_t* unary = nullptr;
  const uint32_t* binary = nullptr;                 // the block's binary parts
  uint32_t bits = 0, start = 0, end = 0, wide = 0;  // wide: W = 16 (uniform over the warp)
  uint32_t low = 0, high = 0;                       // the words of this lane's first-round unary bits
  uint32_t window_low = 0, window_high = 0;         // the words of this lane's binary parts (bits ≤ 8)
};

// Issues a block's loads: its header (parameter, unary offset, unary range), then what they address.
template <int BS>
__device__ __forceinline__ RiceBlock rice_issue(const DeviceSequence& seq, uint32_t block, uint32_t n) {
  RiceBlock r;
  const uint32_t lane = lane_id();
  r.bits = __ldg(seq.words);
  r.unary = seq.words + __ldg(seq.words + 1);
  r.start = __ldg(seq.endpoints + block), r.end = __ldg(seq.endpoints + block + 1);
  r.binary = seq.words + 2 + size_t{block} * (BS / 32) * r.bits;
  const uint32_t origin = r.start & ~7u;
  r.wide = r.end - origin > 32 * 8;
  const uint32_t width = r.wide ? 16 : 8;
  const uint32_t at = origin + lane * width;  // a multiple of 8: W = 16 straddles a word at 24 mod 32
  const uint32_t* word = r.unary + (at >> 5);
  r.low = at < r.end ? __ldg(word) : 0;
  r.high = at < r.end && (at & 31) + width > 32 ? __ldg(word + 1) : 0;
  if constexpr (BS == 128) {  // a lane's four slots lie in two words (at most one past the last: kReadPaddingWords)
    const uint32_t* slots = r.binary + ((lane * 4 * r.bits) >> 5);
    const bool window = r.bits <= 8 && lane * 4 < n;
    r.window_low = window ? __ldg(slots) : 0;
    r.window_high = window ? __ldg(slots + 1) : 0;
  }
  return r;
}

// This lane's zeros among bits [at, at + W) of the unary array, clipped to [start, end); `at` is a
// multiple of 8 and at most 7 below `start`. From the words given, or loaded (later rounds).
template <uint32_t W>
__device__ __forceinline__ uint32_t rice_zeros_of(uint32_t low, uint32_t high, uint32_t at, uint32_t start,
                                                  uint32_t end) {
  if (at >= end) return 0;
  uint32_t zeros = ~__funnelshift_r(low, high, at & 31) & ((1u << W) - 1);
  if (at < start) zeros &= ~0u << (start - at);
  if (end - at < W) zeros &= (1u << (end - at)) - 1;
  return zeros;
}

template <uint32_t W>
__device__ __forceinline__ uint32_t rice_lane_zeros(const uint32_t* unary, uint32_t at, uint32_t start, uint32_t end) {
  if (at >= end) return 0;
  const uint32_t low = __ldg(unary + (at >> 5));
  const uint32_t high = W > 8 && (at & 31) + W > 32 ? __ldg(unary + (at >> 5) + 1) : 0;
  return rice_zeros_of<W>(low, high, at, start, end);
}

// This lane's zeros in the first round (W by r.wide).
template <uint32_t W>
__device__ __forceinline__ uint32_t rice_first_zeros(const RiceBlock& r) {
  return rice_zeros_of<W>(r.low, r.high, (r.start & ~7u) + lane_id() * W, r.start, r.end);
}

// The binary parts into the lane's values: from the loaded window (bits ≤ 8), else unpacked.
template <int BS>
__device__ __forceinline__ void rice_binary(const RiceBlock& r, uint32_t n, uint32_t (&v)[BS / 32]) {
  if (BS == 128 && r.bits <= 8) {  // uniform
    const uint32_t first = lane_id() * 4;
    const uint32_t mask = (1u << r.bits) - 1;
    const uint64_t window = (static_cast<uint64_t>(r.window_high) << 32 | r.window_low) >> ((first * r.bits) & 31);
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) v[k] = first + k < n ? static_cast<uint32_t>(window >> (k * r.bits)) & mask : 0;
  } else {
    warp_unpack_as<BS, false>(r.binary, r.bits, n, v);
  }
}

// Writes the positions of a round's zeros (`at` + bit) to consecutive slots from `slot`: a
// predicated store and a pointer step per bit, no rank arithmetic.
template <uint32_t W, class Slot>
__device__ __forceinline__ void rice_store_ends(uint32_t zeros, uint32_t at, Slot* slot) {
#pragma unroll
  for (uint32_t i = 0; i < W; ++i) {
    if ((zeros >> i & 1u) != 0) *slot++ = static_cast<Slot>(at + i);
  }
}

// Ranks a round's zeros from `seen` and writes their positions to the scratch; returns the round's
// count. Corrupt endpoints (more than BS zeros): a lane whose zeros would pass the scratch drops them.
template <int BS, uint32_t W>
__device__ __forceinline__ uint32_t rice_scatter(uint32_t zeros, uint32_t at, uint32_t seen, WarpScratch<BS>& scratch) {
  uint32_t total;
  const uint32_t count = __popc(zeros);
  const uint32_t rank = seen + warp_exclusive_sum(count, total);
  rice_store_ends<W>(rank + count <= BS ? zeros : 0, at, scratch.values + rank);
  return total;
}

// A lane's four values from the ends of their codes (`ends`, by rank) and the end before the
// block's first code (`before_first`).
template <int BS, class End>
__device__ __forceinline__ void rice_values(const End* ends, uint32_t before_first, uint32_t bits, uint32_t n,
                                            uint32_t (&v)[BS / 32]) {
  const uint32_t lane = lane_id();
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    const uint32_t first = g * 128 + lane * 4;
    uint32_t end[4];
    if constexpr (sizeof(End) == 2) {
      const uint2 pair = *reinterpret_cast<const uint2*>(ends + first);
      end[0] = pair.x & 0xFFFFu, end[1] = pair.x >> 16, end[2] = pair.y & 0xFFFFu, end[3] = pair.y >> 16;
    } else {
      const uint4 quad = *reinterpret_cast<const uint4*>(ends + first);
      end[0] = quad.x, end[1] = quad.y, end[2] = quad.z, end[3] = quad.w;
    }
    const uint32_t before = first == 0 ? before_first : ends[first == 0 ? 0 : first - 1];
    const uint32_t quotient[4] = {end[0] - before - 1, end[1] - end[0] - 1, end[2] - end[1] - 1, end[3] - end[2] - 1};
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t remainder = v[4 * g + k];
      const uint32_t value = bits >= 32 ? remainder : (quotient[k] << bits) | remainder;
      v[4 * g + k] = first + k < n ? value : 0;
    }
  }
}

template <int BS>
__device__ __forceinline__ void rice_finish(const RiceBlock& r, uint32_t n, uint32_t (&v)[BS / 32],
                                            WarpScratch<BS>& scratch) {
  const uint32_t lane = lane_id();
  const uint32_t origin = r.start & ~7u;
  rice_binary<BS>(r, n, v);
  __syncwarp();  // earlier readers of the scratch are done
  if (r.wide) {
    uint32_t seen = rice_scatter<BS, 16>(rice_first_zeros<16>(r), origin + lane * 16, 0, scratch);
    // Only for very long codes; a full block's ends are all found once BS are seen (more: corrupt).
    for (uint32_t round = origin + 512; round < r.end && seen < BS; round += 512) {
      const uint32_t at = round + lane * 16;
      seen += rice_scatter<BS, 16>(rice_lane_zeros<16>(r.unary, at, r.start, r.end), at, seen, scratch);
    }
  } else {
    rice_scatter<BS, 8>(rice_first_zeros<8>(r), origin + lane * 8, 0, scratch);
  }
  __syncwarp();
  rice_values<BS>(scratch.values, r.start - 1, r.bits, n, v);
}

// A block's docIDs and frequencies together where each unary range fits one round (≤ 512 bits,
// nearly every block): one warp scan ranks both (the two counts in the halves of a word), and the
// ends go to the scratch as 16-bit offsets from each range's origin, the docIDs' in its first
// half and the frequencies' in its second.
template <int BS, uint32_t kDocWidth, uint32_t kFreqWidth>
__device__ __forceinline__ void rice_finish_pair(const RiceBlock& d, const RiceBlock& f, uint32_t n,
                                                 uint32_t (&docs)[BS / 32], uint32_t (&freqs)[BS / 32],
                                                 WarpScratch<BS>& scratch) {
  const uint32_t lane = lane_id();
  uint16_t* ends = reinterpret_cast<uint16_t*>(scratch.values);
  const uint32_t doc_zeros = rice_first_zeros<kDocWidth>(d), freq_zeros = rice_first_zeros<kFreqWidth>(f);
  const uint32_t doc_count = __popc(doc_zeros), freq_count = __popc(freq_zeros);
  uint32_t total;
  const uint32_t ranks = warp_exclusive_sum(doc_count | freq_count << 16, total);  // halves: ≤ 512 each
  const uint32_t doc_rank = ranks & 0xFFFFu, freq_rank = ranks >> 16;
  __syncwarp();  // earlier readers of the scratch are done
  // Corrupt endpoints (more than BS zeros): a lane whose zeros would pass its half drops them.
  rice_store_ends<kDocWidth>(doc_rank + doc_count <= BS ? doc_zeros : 0, lane * kDocWidth, ends + doc_rank);
  rice_store_ends<kFreqWidth>(freq_rank + freq_count <= BS ? freq_zeros : 0, lane * kFreqWidth, ends + BS + freq_rank);
  rice_binary<BS>(d, n, docs);
  rice_binary<BS>(f, n, freqs);
  __syncwarp();
  rice_values<BS>(ends, d.start - (d.start & ~7u) - 1, d.bits, n, docs);
  rice_values<BS>(ends + BS, f.start - (f.start & ~7u) - 1, f.bits, n, freqs);
}

template <int BS>
__device__ __forceinline__ void rice_finish_postings(const RiceBlock& d, const RiceBlock& f, uint32_t n,
                                                     uint32_t (&docs)[BS / 32], uint32_t (&freqs)[BS / 32],
                                                     WarpScratch<BS>& scratch) {
  if (d.end - (d.start & ~7u) > 512 || f.end - (f.start & ~7u) > 512) {  // uniform; codes of hundreds of bits
    rice_finish<BS>(d, n, docs, scratch);
    rice_finish<BS>(f, n, freqs, scratch);
  } else if (d.wide) {
    if (f.wide)
      rice_finish_pair<BS, 16, 16>(d, f, n, docs, freqs, scratch);
    else
      rice_finish_pair<BS, 16, 8>(d, f, n, docs, freqs, scratch);
  } else {
    if (f.wide)
      rice_finish_pair<BS, 8, 16>(d, f, n, docs, freqs, scratch);
    else
      rice_finish_pair<BS, 8, 8>(d, f, n, docs, freqs, scratch);
  }
}

template <int BS>
__device__ void warp_decode_rice(const DeviceSequence& seq, uint32_t block, uint32_t n, uint32_t (&v)[BS / 32],
                                 WarpScratch<BS>& scratch) {
  rice_finish<BS>(rice_issue<BS>(seq, block, n), n, v, scratch);
}

}  // namespace warp::gpu
