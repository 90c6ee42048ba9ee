// Warp-per-block decoders for every codec: one warp decodes one compressed block, no barrier over
// the thread block, so the warps of a thread block work on different blocks at once and a block's
// latency is hidden by the others'. Lane l holds values (j / 4) * 128 + l * 4 + j % 4 for
// j < BS / 32: each group of four registers covers 128 consecutive values over the warp, so loads
// of packed slots and 16-byte stores of results are contiguous across the warp.
// - Slot codecs (BP, both PForDeltas, ParaPFor, Rice's binary part): each lane extracts its slots.
// - Exceptions (PForDelta, ParaPFor): the block goes to the warp's shared scratch, the warp patches
//   the exceptions lane-strided, the lanes read their values back — only when the block has any.
// - VByte: a lane's four selectors sit in one byte; a warp prefix sum of the lengths gives each
//   lane its byte offset, and each value is one or two aligned word loads and a funnel shift.
// - Rice: each lane takes 8 or 16 bits of the block's unary range, a warp prefix sum ranks the zeros
//   (code ends) and their positions go to the warp's scratch; a lane's quotients are differences of
//   them. The whole-list kernel ranks a block's docIDs and frequencies in one scan.
// - LRC family: each lane finds its values' record once and decodes its docIDs from the line.
// The formats are common/codec's; the thread-block decoders of block_decode.cuh remain for the
// query kernels that decode a block a thread block; both are checked against the CPU in tests.
#pragma once
#include "leaf/gpu/decode/block_decode.cuh"

namespace warp::gpu {

template <int BS>
struct WarpLayout {
  __device__ static __forceinline__ uint32_t index(uint32_t lane, uint32_t j) {
    return (j / 4) * 128 + lane * 4 + (j % 4);
  }
};

// One warp's shared scratch: a block of values for patching exceptions.
template <int BS>
struct WarpScratch {
  uint32_t values[BS];
};

__device__ __forceinline__ uint32_t lane_id() { return threadIdx.x & 31u; }

// Exclusive prefix sum over the warp; `total` gets the warp's sum. Every lane calls it.
__device__ __forceinline__ uint32_t warp_exclusive_sum(uint32_t value, uint32_t& total) {
  const uint32_t lane = lane_id();
  uint32_t inclusive = value;
  for (uint32_t offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  total = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
  return inclusive - value;
}

// v[j] = slot index(lane, j) of `bits` bits of a block's slots packed from word-aligned `words`,
// 0 past n. 32-bit arithmetic (a block's slots span at most 256 × 32 bits); reads at most one word
// past the last slot's word (kReadPaddingWords). Up to 8 bits a lane's four slots lie in two
// words, loaded once; wider slots are read one by one with a funnel shift.
template <int BS, bool kFull>
__device__ __forceinline__ void warp_unpack_as(const uint32_t* words, uint32_t bits, uint32_t n,
                                               uint32_t (&v)[BS / 32]) {
  const uint32_t lane = lane_id();
  const uint32_t mask = bits >= 32 ? 0xFFFFFFFFu : (1u << bits) - 1;
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    const uint32_t first = g * 128 + lane * 4;
    uint32_t bit = first * bits;
    if (bits <= 8) {  // uniform
      uint64_t window = 0;
      if (kFull || first < n) {
        const uint32_t* at = words + (bit >> 5);
        window = static_cast<uint64_t>(at[0]) | static_cast<uint64_t>(at[1]) << 32;
      }
      window >>= bit & 31;
#pragma unroll
      for (uint32_t k = 0; k < 4; ++k) {
        v[4 * g + k] = kFull || first + k < n ? static_cast<uint32_t>(window >> (k * bits)) & mask : 0;
      }
    } else {
#pragma unroll
      for (uint32_t k = 0; k < 4; ++k, bit += bits) {
        uint32_t value = 0;
        if (kFull || first + k < n) {
          const uint32_t* at = words + (bit >> 5);
          value = __funnelshift_r(at[0], at[1], bit & 31) & mask;
        }
        v[4 * g + k] = value;
      }
    }
  }
}

// Full blocks (all but a list's last) skip the per-slot bounds.
template <int BS>
__device__ __forceinline__ void warp_unpack(const uint32_t* words, uint32_t bits, uint32_t n, uint32_t (&v)[BS / 32]) {
  if (n == BS) {
    warp_unpack_as<BS, true>(words, bits, n, v);
  } else {
    warp_unpack_as<BS, false>(words, bits, n, v);
  }
}

template <int BS>
__device__ __forceinline__ void warp_spill(const uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  __syncwarp();  // earlier readers of the scratch are done
  const uint32_t lane = lane_id();
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    *reinterpret_cast<uint4*>(&scratch.values[g * 128 + lane * 4]) =
        make_uint4(v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]);
  }
  __syncwarp();
}

template <int BS>
__device__ __forceinline__ void warp_reload(uint32_t (&v)[BS / 32], const WarpScratch<BS>& scratch) {
  __syncwarp();  // every patch is written
  const uint32_t lane = lane_id();
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    const uint4 q = *reinterpret_cast<const uint4*>(&scratch.values[g * 128 + lane * 4]);
    v[4 * g] = q.x, v[4 * g + 1] = q.y, v[4 * g + 2] = q.z, v[4 * g + 3] = q.w;
  }
}

// VByte value of `length` bytes at byte `position` of word-aligned `data`: one word, or two when it
// straddles a word boundary (never a word past the value's last byte).
__device__ __forceinline__ uint32_t vbyte_value(const uint32_t* data, uint32_t position, uint32_t length) {
  const uint32_t word = position >> 2, shift = (position & 3) * 8;
  const uint32_t low = data[word];
  const uint32_t high = (position & 3) + length > 4 ? data[word + 1] : 0;
  const uint32_t v = __funnelshift_r(low, high, shift);
  return length == 4 ? v : v & ((1u << (8 * length)) - 1);
}

template <int BS>
__device__ void warp_decode_vbyte(const DeviceSequence& seq, uint32_t block, uint32_t n, uint32_t (&v)[BS / 32]) {
  const uint32_t lane = lane_id();
  const uint32_t* base = seq.words + seq.endpoints[block];
  const uint32_t* data = base + (n * 2 + 31) / 32;
  uint32_t carried = 0;
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    const uint32_t first = g * 128 + lane * 4;  // four selectors in one byte of one word
    const uint32_t selectors = first < n ? (base[first / 16] >> ((first % 16) * 2)) & 0xFFu : 0;
    uint32_t length[4], sum = 0;
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      length[k] = first + k < n ? ((selectors >> (2 * k)) & 3u) + 1 : 0;
      sum += length[k];
    }
    uint32_t total;
    uint32_t position = carried + warp_exclusive_sum(sum, total);
    carried += total;
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      v[4 * g + k] = length[k] != 0 ? vbyte_value(data, position, length[k]) : 0;
      position += length[k];
    }
  }
}

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

// LRC docIDs: lane values index(lane, j) of the block, decoded from their records' lines.
template <int BS>
__device__ void warp_decode_lrc_docs(const DeviceSequence& seq, uint32_t block, uint32_t n, uint32_t (&docs)[BS / 32]) {
  const uint32_t lane = lane_id();
  const uint32_t last_record = seq.endpoints[block + 1];
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    const uint32_t first = g * 128 + lane * 4;
    if (first >= n) {
      for (uint32_t k = 0; k < 4; ++k) docs[4 * g + k] = 0;
      continue;
    }
    const uint32_t position = block * BS + first;
    uint32_t r = lrc::record_of(seq.words, seq.endpoints, block, position);
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      if (first + k >= n) {
        docs[4 * g + k] = 0;
        continue;
      }
      while (r < last_record && lrc::record(seq.words, r + 1)[lrc::kFirst] <= position + k) ++r;
      docs[4 * g + k] = lrc::value_in_record(seq.words, r, position + k);
    }
  }
}

// The value just before value index(lane, j) in block order, for j a group's first register:
// from the previous lane, from lane 31 of the previous group, or `before_block` for value 0.
template <int BS>
__device__ __forceinline__ uint32_t previous_value(const uint32_t (&v)[BS / 32], uint32_t g, uint32_t before_block) {
  const uint32_t lane = lane_id();
  const uint32_t from_left = __shfl_up_sync(0xFFFFFFFFu, v[4 * g + 3], 1);
  const uint32_t from_group = g == 0 ? before_block : __shfl_sync(0xFFFFFFFFu, v[g == 0 ? 0 : 4 * g - 1], 31);
  return lane > 0 ? from_left : from_group;
}

// The slot codecs (BP, both PForDeltas, ParaPFor) decode in two steps: the slots
// (warp_unpack_slots), then the exceptions (warp_patch_slots) between a spill and a reload. (Doing
// the docIDs' and the frequencies' steps side by side, two scratches, measured slower on the H100:
// more registers, fewer warps resident.)
// What warp_patch_slots needs of a block: where its exceptions are and their widths, and the
// first 32 exceptions themselves (lane e holds exception e's slot and high bits), loaded with the
// slots so that their latency overlaps the slots' instead of following it.
// Exception `lane` (lane < count) is kept as loaded — the words holding its slot and high bits —
// and extracted only where it is patched, so that the slots' loads are issued before its loads are
// waited on (H100, whole lists at 2^26: Ding's PForDelta 70-71% -> 74% of copy bandwidth, ParaPFor
// 60% -> 62% with 5 thread blocks resident, per-block PForDelta unchanged at 59-60%).
struct SlotPatch {
  const uint32_t* at = nullptr;  // PForDelta: the position bytes; ParaPFor: the indices
  uint32_t b = 0, high_width = 0, index_width = 0, first = 0, count = 0;
  uint32_t slot_low = 0, slot_high = 0, high_low = 0, high_high = 0;  // exception `lane`'s words
};

// Bits [index * bits, + bits) of the two words loaded from word (index * bits) / 32.
__device__ __forceinline__ uint32_t field_of(uint32_t low, uint32_t high, uint32_t index, uint32_t bits) {
  return __funnelshift_r(low, high, (index * bits) & 31) & (bits >= 32 ? 0xFFFFFFFFu : (1u << bits) - 1);
}

template <int BS, uint32_t kCodec>
__device__ __forceinline__ SlotPatch warp_unpack_slots(const DeviceSequence& seq, uint32_t block, uint32_t n,
                                                       uint32_t (&v)[BS / 32]) {
  SlotPatch patch;
  const uint32_t lane = lane_id();
  if constexpr (kCodec == static_cast<uint32_t>(CodecId::kBp128) || kCodec == static_cast<uint32_t>(CodecId::kBp256)) {
    const uint32_t begin = seq.endpoints[block];
    const bool full = n == BS;
    const uint32_t bits = full ? (seq.endpoints[block + 1] - begin) * 32 / BS : seq.words[begin];
    warp_unpack<BS>(seq.words + begin + (full ? 0 : 1), bits, n, v);
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforBlock)) {
    const uint32_t* at = seq.words + seq.endpoints[block];
    const uint32_t header = at[0];
    patch.b = header & 63, patch.high_width = (header >> 6) & 63, patch.count = header >> 12;
    patch.at = at + 1 + (n * patch.b + 31) / 32;
    if (lane < patch.count) {
      const uint32_t* high = patch.at + (patch.count + 3) / 4 + ((lane * patch.high_width) >> 5);
      patch.slot_low = reinterpret_cast<const uint8_t*>(patch.at)[lane];
      patch.high_low = high[0], patch.high_high = high[1];
    }
    warp_unpack<BS>(at + 1, patch.b, n, v);
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kParaPfor)) {
    const uint32_t* at = seq.words + seq.endpoints[block];
    const parapfor::BlockHeader h = parapfor::header(at[0]);
    patch.b = h.b, patch.high_width = h.hb, patch.index_width = h.ib, patch.count = h.en;
    patch.at = at + 1 + parapfor::packed(n, h.b);
    if (lane < patch.count) {
      const uint32_t* index = patch.at + ((lane * patch.index_width) >> 5);
      const uint32_t* high =
          patch.at + parapfor::packed(patch.count, patch.index_width) + ((lane * patch.high_width) >> 5);
      patch.slot_low = index[0], patch.slot_high = index[1];
      patch.high_low = high[0], patch.high_high = high[1];
    }
    warp_unpack<BS>(at + 1, h.b, n, v);
  } else {  // kPforDing
    patch.b = seq.words[0];
    patch.first = seq.endpoints[block];
    patch.count = seq.endpoints[block + 1] - patch.first;
    if (lane < patch.count) {
      patch.slot_low = seq.exception_positions[patch.first + lane];
      patch.high_low = seq.exception_high[patch.first + lane];
    }
    warp_unpack<BS>(seq.words + 4 + size_t{block} * (BS / 32) * patch.b, patch.b, n, v);
  }
  return patch;
}

// Exceptions 32.. of a block (the first 32 came with the slots).
template <int BS, uint32_t kCodec>
__device__ __forceinline__ void warp_patch_slots(const DeviceSequence& seq, uint32_t block, const SlotPatch& patch,
                                                 WarpScratch<BS>& scratch) {
  const uint32_t lane = lane_id();
  if (lane < patch.count) {
    uint32_t slot = patch.slot_low, high = patch.high_low;  // Ding's: one value a word
    if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforBlock)) {
      high = field_of(patch.high_low, patch.high_high, lane, patch.high_width);
    } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kParaPfor)) {
      slot = field_of(patch.slot_low, patch.slot_high, lane, patch.index_width);
      high = field_of(patch.high_low, patch.high_high, lane, patch.high_width);
    } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforDing)) {
      slot -= block * BS;
    }
    scratch.values[slot & (BS - 1)] |= high << patch.b;  // & (BS - 1): a corrupt position stays in the scratch
  }
  if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforBlock)) {
    const auto* positions = reinterpret_cast<const uint8_t*>(patch.at);
    const uint32_t* high = patch.at + (patch.count + 3) / 4;
    for (uint32_t e = 32 + lane; e < patch.count; e += 32)
      scratch.values[positions[e] & (BS - 1)] |= fmt::extract(high, e, patch.high_width) << patch.b;
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kParaPfor)) {
    const uint32_t* high = patch.at + parapfor::packed(patch.count, patch.index_width);
    for (uint32_t e = 32 + lane; e < patch.count; e += 32) {
      scratch.values[fmt::extract(patch.at, e, patch.index_width) & (BS - 1)] |= fmt::extract(high, e, patch.high_width)
                                                                                 << patch.b;
    }
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforDing)) {
    for (uint32_t e = patch.first + 32 + lane; e < patch.first + patch.count; e += 32) {
      scratch.values[(seq.exception_positions[e] - block * BS) & (BS - 1)] |= seq.exception_high[e] << patch.b;
    }
  }
}

// A block's exceptions patched into the lane's values through the warp's scratch (none: nothing).
template <int BS, uint32_t kCodec>
__device__ __forceinline__ void warp_apply_patch(const DeviceSequence& seq, uint32_t block, const SlotPatch& patch,
                                                 uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  if (patch.count != 0) {  // uniform
    warp_spill<BS>(v, scratch);
    warp_patch_slots<BS, kCodec>(seq, block, patch, scratch);
    warp_reload<BS>(v, scratch);
  }
}

// A slot codec's block: its slots, then its exceptions patched in the scratch.
template <int BS, uint32_t kCodec>
__device__ __forceinline__ void warp_decode_slots(const DeviceSequence& seq, uint32_t block, uint32_t n,
                                                  uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  warp_apply_patch<BS, kCodec>(seq, block, warp_unpack_slots<BS, kCodec>(seq, block, n, v), v, scratch);
}

// The codecs decoded by slots and patched exceptions (warp_unpack_slots), known at compile time.
__host__ __device__ constexpr bool is_slot_codec(uint32_t codec) {
  return codec == static_cast<uint32_t>(CodecId::kBp128) || codec == static_cast<uint32_t>(CodecId::kBp256) ||
         codec == static_cast<uint32_t>(CodecId::kPforDing) || codec == static_cast<uint32_t>(CodecId::kPforBlock) ||
         codec == static_cast<uint32_t>(CodecId::kParaPfor);
}

// kCodec (a CodecId) compiles a decoder for that codec alone, so a kernel of one codec keeps the
// registers of that decoder only (more warps resident, more loads in flight); kAnyCodec compiles
// all of them and follows the list's codec at run time.
inline constexpr uint32_t kAnyCodec = 0;

// The frequencies' codec of a list whose docIDs use `codec` (Codec::frequency_codec).
__host__ __device__ constexpr uint32_t frequency_codec_of(uint32_t codec) {
  return codec >= static_cast<uint32_t>(CodecId::kLrc) && codec <= static_cast<uint32_t>(CodecId::kHsLrc)
             ? static_cast<uint32_t>(CodecId::kParaPfor)
             : codec;
}

// Decodes what the codec stores for block `block` of `seq` (docID gaps minus one, or frequencies
// minus one; LRC: gaps minus one of its docIDs) into the lane's registers, 0 past n. Every lane of
// the warp calls it with the same arguments.
template <int BS, uint32_t kCodec = kAnyCodec>
__device__ void warp_decode_values(const DeviceSequence& seq, uint32_t codec, uint32_t block, uint32_t n,
                                   uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  const uint32_t lane = lane_id();
  switch (static_cast<CodecId>(kCodec == kAnyCodec ? codec : kCodec)) {
    case CodecId::kBp128:
    case CodecId::kBp256:
      warp_decode_slots<BS, static_cast<uint32_t>(CodecId::kBp128)>(seq, block, n, v, scratch);
      break;
    case CodecId::kVByte:
      warp_decode_vbyte<BS>(seq, block, n, v);
      break;
    case CodecId::kPforBlock:
      warp_decode_slots<BS, static_cast<uint32_t>(CodecId::kPforBlock)>(seq, block, n, v, scratch);
      break;
    case CodecId::kPforDing:
      warp_decode_slots<BS, static_cast<uint32_t>(CodecId::kPforDing)>(seq, block, n, v, scratch);
      break;
    case CodecId::kParaPfor:
      warp_decode_slots<BS, static_cast<uint32_t>(CodecId::kParaPfor)>(seq, block, n, v, scratch);
      break;
    case CodecId::kRice:
      warp_decode_rice<BS>(seq, block, n, v, scratch);
      break;
    case CodecId::kLrc:
    case CodecId::kLrcSeg:
    case CodecId::kSegLrc:
    case CodecId::kHsLrc: {
      warp_decode_lrc_docs<BS>(seq, block, n, v);
      const uint32_t before_block =
          block == 0 ? 0xFFFFFFFFu : lrc::value_at(seq.words, seq.endpoints, BS, block * BS - 1);
      uint32_t previous[BS / 128];
#pragma unroll
      for (uint32_t g = 0; g < BS / 128; ++g) previous[g] = previous_value<BS>(v, g, before_block);
#pragma unroll
      for (int j = BS / 32 - 1; j >= 0; --j) {  // backwards: each gap needs the docID before it
        const uint32_t before = j % 4 == 0 ? previous[j / 4] : v[j - 1];
        v[j] = WarpLayout<BS>::index(lane, j) < n ? v[j] - before - 1 : 0;
      }
      break;
    }
  }
}

// Decodes block `block` of a posting list into docIDs and frequencies in the lane's registers
// (valid where index(lane, j) < n, which it returns): docIDs by a prefix sum of the gaps from the
// previous block's last docID — within the lane's four values, then over the warp — or the LRC
// docIDs directly. Every lane of the warp calls it.
// With kCodec, the list's docIDs must use kCodec and its frequencies frequency_codec_of(kCodec).
template <int BS, uint32_t kCodec = kAnyCodec>
__device__ uint32_t warp_decode_postings(const DeviceList& list, uint32_t block, uint32_t (&docs)[BS / 32],
                                         uint32_t (&freqs)[BS / 32], WarpScratch<BS>& scratch) {
  constexpr uint32_t kFreqCodec = kCodec == kAnyCodec ? kAnyCodec : frequency_codec_of(kCodec);
  const uint32_t lane = lane_id();
  const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
  const bool lrc_docs = is_lrc(kCodec == kAnyCodec ? list.codec : kCodec);
  // Loaded first: nothing it needs is decoded.
  uint32_t doc = lrc_docs || block == 0 ? 0xFFFFFFFFu : list.block_last_docid[block - 1];
  if constexpr (kCodec == static_cast<uint32_t>(CodecId::kRice)) {
    // Both sequences' loads (endpoints, then binary parts and first rounds) before either's ranks.
    const RiceBlock doc_rice = rice_issue<BS>(list.docs, block, n);
    const RiceBlock freq_rice = rice_issue<BS>(list.freqs, block, n);
    rice_finish_postings<BS>(doc_rice, freq_rice, n, docs, freqs, scratch);
  } else if constexpr (is_slot_codec(kCodec) || (kCodec != kAnyCodec && is_slot_codec(kFreqCodec))) {
    // With the codecs known, both sequences' slots and first exceptions are loaded before either
    // is patched: two chains of dependent loads in flight at once.
    const SlotPatch freq_patch = warp_unpack_slots<BS, kFreqCodec>(list.freqs, block, n, freqs);
    if constexpr (is_slot_codec(kCodec)) {
      const SlotPatch doc_patch = warp_unpack_slots<BS, kCodec>(list.docs, block, n, docs);
      warp_apply_patch<BS, kCodec>(list.docs, block, doc_patch, docs, scratch);
    } else if (lrc_docs) {
      warp_decode_lrc_docs<BS>(list.docs, block, n, docs);
    } else {
      warp_decode_values<BS, kCodec>(list.docs, list.codec, block, n, docs, scratch);
    }
    warp_apply_patch<BS, kFreqCodec>(list.freqs, block, freq_patch, freqs, scratch);
  } else {
    if (lrc_docs) {
      warp_decode_lrc_docs<BS>(list.docs, block, n, docs);
    } else {
      warp_decode_values<BS, kCodec>(list.docs, list.codec, block, n, docs, scratch);
    }
    warp_decode_values<BS, kFreqCodec>(list.freqs, list.freq_codec, block, n, freqs, scratch);
  }
  if (!lrc_docs) {
#pragma unroll
    for (uint32_t g = 0; g < BS / 128; ++g) {
      uint32_t sum = 0;
#pragma unroll
      for (uint32_t k = 0; k < 4; ++k) {
        docs[4 * g + k] = g * 128 + lane * 4 + k < n ? docs[4 * g + k] + 1 : 0;  // gap
        sum += docs[4 * g + k];
      }
      uint32_t total;
      uint32_t running = doc + warp_exclusive_sum(sum, total);
#pragma unroll
      for (uint32_t k = 0; k < 4; ++k) docs[4 * g + k] = running += docs[4 * g + k];
      doc += total;
    }
  }
#pragma unroll
  for (uint32_t j = 0; j < BS / 32; ++j) freqs[j] += 1;
  return n;
}

}  // namespace warp::gpu
