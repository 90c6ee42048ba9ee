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
#include "leaf/gpu/decode/warp_decode_rice.cuh"
#include "leaf/gpu/decode/warp_primitives.cuh"

namespace warp::gpu {

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
