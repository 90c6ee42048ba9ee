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
// - Rice: a warp counts the zero bits of the block's unary range word by word (prefix sum over
//   the lanes), each lane finds where its first value's code starts (the rank-select of that zero
//   with a shuffle binary search and fns), then reads its own unary codes one by one.
// - LRC family: each lane finds its values' record once and decodes its docIDs from the line.
// The formats are common/codec's; the thread-block decoders of block_decode.cuh remain for the
// query kernels that decode a block a thread block; both are checked against the CPU in tests.
#pragma once
#include "leaf/gpu/block_decode.cuh"

namespace warp::gpu {

template <int BS>
struct WarpLayout {
  __device__ static __forceinline__ uint32_t index(uint32_t lane, uint32_t j) { return (j / 4) * 128 + lane * 4 + (j % 4); }
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

// v[j] = slot (first + index of j) of `bits` bits, 0 past n.
template <int BS>
__device__ __forceinline__ void warp_unpack(const uint32_t* words, uint64_t first, uint32_t bits, uint32_t n,
                                            uint32_t (&v)[BS / 32]) {
  const uint32_t lane = lane_id();
#pragma unroll
  for (uint32_t j = 0; j < BS / 32; ++j) {
    const uint32_t index = WarpLayout<BS>::index(lane, j);
    v[j] = index < n ? fmt::extract(words, first + index, bits) : 0;
  }
}

template <int BS>
__device__ __forceinline__ void warp_spill(const uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  __syncwarp();  // earlier readers of the scratch are done
  const uint32_t lane = lane_id();
#pragma unroll
  for (uint32_t g = 0; g < BS / 128; ++g) {
    *reinterpret_cast<uint4*>(&scratch.values[g * 128 + lane * 4]) = make_uint4(v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]);
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

// 64 bits of Rice's unary array from `bit` on (the high bits of the second word shifted out);
// reading one word past the array is allowed (kReadPaddingWords).
__device__ __forceinline__ uint64_t rice_window(const uint32_t* unary, uint32_t bit) {
  const uint32_t word = bit >> 5;
  return (static_cast<uint64_t>(unary[word]) | static_cast<uint64_t>(unary[word + 1]) << 32) >> (bit & 31);
}

template <int BS>
__device__ void warp_decode_rice(const DeviceSequence& seq, uint32_t block, uint32_t n, uint32_t (&v)[BS / 32]) {
  constexpr uint32_t kGroups = BS / 128;
  const uint32_t lane = lane_id();
  const uint32_t bits = seq.words[0];
  const uint32_t* unary = seq.words + seq.words[1];
  warp_unpack<BS>(seq.words + 2, uint64_t{block} * BS, bits, n, v);  // the binary parts
  const uint32_t start = seq.endpoints[block], end = seq.endpoints[block + 1];
  // Where the code of each group's first value of this lane starts: after the target-th zero of the
  // block's unary range (target = the value's index in the block).
  uint32_t begin[kGroups];
#pragma unroll
  for (uint32_t g = 0; g < kGroups; ++g) begin[g] = start;
  const uint32_t first_word = start >> 5, last_word = (end - 1) >> 5;
  uint32_t seen = 0;
  for (uint32_t chunk = first_word; chunk <= last_word && seen < n; chunk += 32) {
    const uint32_t zeros = rice_range_zeros(unary, chunk + lane, start, end);
    const uint32_t count = __popc(zeros);
    uint32_t total;
    const uint32_t before = warp_exclusive_sum(count, total);
    const uint32_t inclusive = before + count;
#pragma unroll
    for (uint32_t g = 0; g < kGroups; ++g) {
      const uint32_t target = g * 128 + lane * 4;
      const uint32_t want = target - seen;  // meaningful when the target-th zero is in this chunk
      uint32_t at = 0;                      // the first lane whose inclusive count reaches `want`
      for (uint32_t step = 16; step > 0; step >>= 1) {
        if (__shfl_sync(0xFFFFFFFFu, inclusive, at + step - 1) < want) at += step;
      }
      const uint32_t word_zeros = __shfl_sync(0xFFFFFFFFu, zeros, at);
      const uint32_t zeros_before = __shfl_sync(0xFFFFFFFFu, before, at);
      if (target > seen && target <= seen + total) begin[g] = (chunk + at) * 32 + __fns(word_zeros, 0, static_cast<int>(want - zeros_before)) + 1;
    }
    seen += total;
  }
#pragma unroll
  for (uint32_t g = 0; g < kGroups; ++g) {
    // The lane's four codes are usually a few bits: they are read from one 64-bit window, and a code
    // running past it is read word by word.
    uint32_t bit = begin[g];
    uint64_t window = rice_window(unary, bit);
    uint32_t available = 64 - (bit & 31);
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      if (g * 128 + lane * 4 + k >= n) break;
      uint32_t quotient = __ffsll(static_cast<long long>(~window)) - 1;  // ones before the first zero
      if (quotient < available) {
        bit += quotient + 1;
        available -= quotient + 1;
        window = quotient + 1 >= 64 ? 0 : window >> (quotient + 1);
      } else {
        quotient = 0;
        for (;;) {  // ones up to the next zero; bits shifted in past the word are zeros and stop it
          const uint32_t left = 32 - (bit & 31);
          const uint32_t ones = __clz(__brev(~(unary[bit >> 5] >> (bit & 31))));
          quotient += ones;
          bit += ones;
          if (ones < left) break;
        }
        ++bit;  // the terminating zero
        window = rice_window(unary, bit);
        available = 64 - (bit & 31);
      }
      const uint32_t remainder = v[4 * g + k];
      v[4 * g + k] = bits >= 32 ? remainder : static_cast<uint32_t>((static_cast<uint64_t>(quotient) << bits) | remainder);
    }
  }
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
// What warp_patch_slots needs of a block: where its exceptions are and their widths.
struct SlotPatch {
  const uint32_t* at = nullptr;  // PForDelta: the position bytes; ParaPFor: the indices
  uint32_t b = 0, high_width = 0, index_width = 0, first = 0, count = 0;
};

template <int BS, uint32_t kCodec>
__device__ __forceinline__ SlotPatch warp_unpack_slots(const DeviceSequence& seq, uint32_t block, uint32_t n,
                                                       uint32_t (&v)[BS / 32]) {
  SlotPatch patch;
  if constexpr (kCodec == static_cast<uint32_t>(CodecId::kBp128) || kCodec == static_cast<uint32_t>(CodecId::kBp256)) {
    const uint32_t begin = seq.endpoints[block];
    const bool full = n == BS;
    const uint32_t bits = full ? (seq.endpoints[block + 1] - begin) * 32 / BS : seq.words[begin];
    warp_unpack<BS>(seq.words + begin + (full ? 0 : 1), 0, bits, n, v);
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforBlock)) {
    const uint32_t* at = seq.words + seq.endpoints[block];
    const uint32_t header = at[0];
    patch.b = header & 63, patch.high_width = (header >> 6) & 63, patch.count = header >> 12;
    warp_unpack<BS>(at + 1, 0, patch.b, n, v);
    patch.at = at + 1 + (n * patch.b + 31) / 32;
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kParaPfor)) {
    const uint32_t* at = seq.words + seq.endpoints[block];
    const parapfor::BlockHeader h = parapfor::header(at[0]);
    patch.b = h.b, patch.high_width = h.hb, patch.index_width = h.ib, patch.count = h.en;
    warp_unpack<BS>(at + 1, 0, h.b, n, v);
    patch.at = at + 1 + parapfor::packed(n, h.b);
  } else {  // kPforDing
    patch.b = seq.words[0];
    warp_unpack<BS>(seq.words + 4, uint64_t{block} * BS, patch.b, n, v);
    patch.first = seq.endpoints[block];
    patch.count = seq.endpoints[block + 1] - patch.first;
  }
  return patch;
}

template <int BS, uint32_t kCodec>
__device__ __forceinline__ void warp_patch_slots(const DeviceSequence& seq, uint32_t block, const SlotPatch& patch,
                                                 WarpScratch<BS>& scratch) {
  const uint32_t lane = lane_id();
  if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforBlock)) {
    const auto* positions = reinterpret_cast<const uint8_t*>(patch.at);
    const uint32_t* high = patch.at + (patch.count + 3) / 4;
    for (uint32_t e = lane; e < patch.count; e += 32) scratch.values[positions[e]] |= fmt::extract(high, e, patch.high_width) << patch.b;
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kParaPfor)) {
    const uint32_t* high = patch.at + parapfor::packed(patch.count, patch.index_width);
    for (uint32_t e = lane; e < patch.count; e += 32) {
      scratch.values[fmt::extract(patch.at, e, patch.index_width)] |= fmt::extract(high, e, patch.high_width) << patch.b;
    }
  } else if constexpr (kCodec == static_cast<uint32_t>(CodecId::kPforDing)) {
    for (uint32_t e = patch.first + lane; e < patch.first + patch.count; e += 32) {
      scratch.values[seq.exception_positions[e] - block * BS] |= seq.exception_high[e] << patch.b;
    }
  }
}

// A slot codec's block: its slots, then its exceptions patched in the scratch.
template <int BS, uint32_t kCodec>
__device__ __forceinline__ void warp_decode_slots(const DeviceSequence& seq, uint32_t block, uint32_t n,
                                                  uint32_t (&v)[BS / 32], WarpScratch<BS>& scratch) {
  const SlotPatch patch = warp_unpack_slots<BS, kCodec>(seq, block, n, v);
  if (patch.count != 0) {  // uniform
    warp_spill<BS>(v, scratch);
    warp_patch_slots<BS, kCodec>(seq, block, patch, scratch);
    warp_reload<BS>(v, scratch);
  }
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
      warp_decode_rice<BS>(seq, block, n, v);
      break;
    case CodecId::kLrc:
    case CodecId::kLrcSeg:
    case CodecId::kSegLrc:
    case CodecId::kHsLrc: {
      warp_decode_lrc_docs<BS>(seq, block, n, v);
      const uint32_t before_block = block == 0 ? 0xFFFFFFFFu : lrc::value_at(seq.words, seq.endpoints, BS, block * BS - 1);
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
  if (is_lrc(kCodec == kAnyCodec ? list.codec : kCodec)) {
    warp_decode_lrc_docs<BS>(list.docs, block, n, docs);
  } else {
    warp_decode_values<BS, kCodec>(list.docs, list.codec, block, n, docs, scratch);
    uint32_t doc = block == 0 ? 0xFFFFFFFFu : list.block_last_docid[block - 1];
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
  warp_decode_values<BS, kFreqCodec>(list.freqs, list.freq_codec, block, n, freqs, scratch);
#pragma unroll
  for (uint32_t j = 0; j < BS / 32; ++j) freqs[j] += 1;
  return n;
}

}  // namespace warp::gpu
