// GPU block decoders, one thread block per compressed block and one thread per integer:
// GPU-BP and GPU-VByte (Mallia et al. 2019 §3), classic PForDelta, Ding et al.'s list-wide PForDelta
// (§6.2: b-bit slots patched from the exception arrays), Rice (§6.1: the unary part decoded by a
// prefix sum over the zero bits of the block's unary range, then combined with the binary part),
// ParaPFor (Ao et al. Algorithm 2: exceptions patched by one thread each) and the LRC family (each
// thread decodes its docID alone from its segment's line; gaps are differences of neighbours).
// decode_block gives what the codec stores (docID gaps minus one, or frequencies minus one);
// decode_postings gives docIDs: a localized prefix sum of the gaps, or the LRC docIDs directly.
// The formats are those of common/codec. Most kernels decode a warp per block (warp_decode.cuh);
// these serve the two that work a block per thread block (slice maxima at load, sparse lists' maxima
// in the OR tiles), whose results the OR tests check against the CPU.
#pragma once
#include <cub/block/block_scan.cuh>

#include "common/codec/codec.hpp"
#include "common/codec/lrc_format.hpp"
#include "common/codec/parapfor_format.hpp"
#include "leaf/gpu/device/device_list.hpp"

namespace warp::gpu {

__device__ __forceinline__ uint32_t extract_bits_dev(const uint32_t* in, uint64_t index, uint32_t bits) {
  return fmt::extract(in, index, bits);
}

__host__ __device__ constexpr bool is_lrc(uint32_t codec) {
  return codec >= static_cast<uint32_t>(CodecId::kLrc) && codec <= static_cast<uint32_t>(CodecId::kHsLrc);
}

// The zero bits (code ends) of word `word` of Rice's unary array that lie in a block's bit range
// [start, end); 0 for a word past the range.
__device__ __forceinline__ uint32_t rice_range_zeros(const uint32_t* unary, uint32_t word, uint32_t start,
                                                     uint32_t end) {
  const uint32_t first_word = start >> 5, last_word = (end - 1) >> 5;
  if (word > last_word) return 0;
  const uint32_t low = word == first_word ? (start & 31) : 0;
  const uint32_t high = word == last_word ? ((end - 1) & 31) + 1 : 32;
  const uint32_t mask = (high == 32 ? 0xFFFFFFFFu : ((1u << high) - 1)) & ~((1u << low) - 1);
  return ~unary[word] & mask;
}

template <int BS>
struct BlockDecodeStorage {
  using Scan = cub::BlockScan<uint32_t, BS>;
  typename Scan::TempStorage scan;
  uint32_t values[BS];
  uint32_t zero_positions[BS];  // Rice: relative bit position of each value's terminating zero
};

// Decodes values block*BS .. block*BS+n-1 of `seq` into storage.values[0..n). Every thread of the
// block must call it (it synchronises); values are valid after it returns. Exception positions
// and Rice code ends index the storage modulo or below BS: a corrupt block decodes to wrong values,
// never outside the storage.
template <int BS>
__device__ void decode_block(const DeviceSequence& seq, uint32_t codec, uint32_t block, uint32_t n,
                             BlockDecodeStorage<BS>& storage) {
  using Scan = typename BlockDecodeStorage<BS>::Scan;
  const uint32_t tid = threadIdx.x;
  switch (static_cast<CodecId>(codec)) {
    case CodecId::kBp128:
    case CodecId::kBp256: {
      const uint32_t begin = seq.endpoints[block], end = seq.endpoints[block + 1];
      const bool full = n == BS;
      const uint32_t bits = full ? (end - begin) * 32 / BS : seq.words[begin];
      if (tid < n) storage.values[tid] = extract_bits_dev(seq.words + begin + (full ? 0 : 1), tid, bits);
      break;
    }
    case CodecId::kVByte: {
      const uint32_t* base = seq.words + seq.endpoints[block];
      const uint32_t length = tid < n ? ((base[tid / 16] >> ((tid % 16) * 2)) & 3) + 1 : 0;
      uint32_t offset;
      Scan(storage.scan).ExclusiveSum(length, offset);
      const auto* data = reinterpret_cast<const uint8_t*>(base + (n * 2 + 31) / 32);
      uint32_t v = 0;
      for (uint32_t k = 0; k < length; ++k) v |= static_cast<uint32_t>(data[offset + k]) << (8 * k);
      if (tid < n) storage.values[tid] = v;
      break;
    }
    case CodecId::kPforBlock: {
      const uint32_t* at = seq.words + seq.endpoints[block];
      const uint32_t header = at[0], bits = header & 63, high_width = (header >> 6) & 63, exceptions = header >> 12;
      if (tid < n) storage.values[tid] = extract_bits_dev(at + 1, tid, bits);
      __syncthreads();
      const uint32_t* after_slots = at + 1 + (n * bits + 31) / 32;
      const auto* positions = reinterpret_cast<const uint8_t*>(after_slots);
      const uint32_t* high = after_slots + (exceptions + 3) / 4;
      for (uint32_t e = tid; e < exceptions; e += BS)
        storage.values[positions[e] & (BS - 1)] |= extract_bits_dev(high, e, high_width) << bits;
      break;
    }
    case CodecId::kPforDing: {
      const uint32_t width = seq.words[0];
      if (tid < n) storage.values[tid] = extract_bits_dev(seq.words + 4, uint64_t{block} * BS + tid, width);
      __syncthreads();
      for (uint32_t e = seq.endpoints[block] + tid; e < seq.endpoints[block + 1]; e += BS) {
        storage.values[(seq.exception_positions[e] - block * BS) & (BS - 1)] |= seq.exception_high[e] << width;
      }
      break;
    }
    case CodecId::kParaPfor: {
      const uint32_t* at = seq.words + seq.endpoints[block];
      const parapfor::BlockHeader h = parapfor::header(at[0]);
      if (tid < n) storage.values[tid] = extract_bits_dev(at + 1, tid, h.b);
      __syncthreads();
      if (tid < h.en) {
        const uint32_t* indices = at + 1 + parapfor::packed(n, h.b);
        const uint32_t index = extract_bits_dev(indices, tid, h.ib);
        storage.values[index & (BS - 1)] |= extract_bits_dev(indices + parapfor::packed(h.en, h.ib), tid, h.hb) << h.b;
      }
      break;
    }
    case CodecId::kLrc:
    case CodecId::kLrcSeg:
    case CodecId::kSegLrc:
    case CodecId::kHsLrc: {
      const uint32_t first = block * BS;
      const uint32_t doc = tid < n ? lrc::value_at(seq.words, seq.endpoints, BS, first + tid) : 0;
      storage.values[tid] = doc;
      __syncthreads();
      const uint32_t previous = tid > 0      ? storage.values[tid - 1]
                                : block == 0 ? 0xFFFFFFFFu
                                             : lrc::value_at(seq.words, seq.endpoints, BS, first - 1);
      __syncthreads();
      if (tid < n) storage.values[tid] = doc - previous - 1;
      break;
    }
    case CodecId::kRice: {
      const uint32_t bits = seq.words[0];
      const uint32_t* unary = seq.words + seq.words[1];
      const uint32_t remainder = tid < n ? extract_bits_dev(seq.words + 2, uint64_t{block} * BS + tid, bits) : 0;
      const uint32_t start = seq.endpoints[block], end = seq.endpoints[block + 1];
      const uint32_t first_word = start >> 5, last_word = (end - 1) >> 5;
      uint32_t zeros_before = 0;
      for (uint32_t chunk = first_word; chunk <= last_word; chunk += BS) {  // localized prefix sum over zero bits
        const uint32_t word_index = chunk + tid;
        uint32_t zeros = rice_range_zeros(unary, word_index, start, end);
        uint32_t before, total;
        Scan(storage.scan).ExclusiveSum(static_cast<uint32_t>(__popc(zeros)), before, total);
        uint32_t z = zeros_before + before;
        while (zeros != 0) {
          const uint32_t bit = __ffs(zeros) - 1;
          zeros &= zeros - 1;
          if (z < BS) storage.zero_positions[z] = word_index * 32 + bit - start;  // more than BS: corrupt endpoints
          ++z;
        }
        zeros_before += total;
        __syncthreads();  // the scan storage is reused by the next chunk
      }
      __syncthreads();
      if (tid < n) {
        const int64_t previous = tid == 0 ? -1 : static_cast<int64_t>(storage.zero_positions[tid - 1]);
        const uint64_t quotient = static_cast<uint64_t>(storage.zero_positions[tid] - previous - 1);
        storage.values[tid] = bits >= 32 ? remainder : static_cast<uint32_t>((quotient << bits) | remainder);
      }
      break;
    }
  }
  __syncthreads();
}

// Decodes block `block` of a posting list into docIDs (localized prefix sum of the gaps from the
// previous block's last docID) and frequencies, one per thread; threads >= n get nothing useful.
template <int BS>
__device__ void decode_postings(const DeviceList& list, uint32_t block, uint32_t n, BlockDecodeStorage<BS>& storage,
                                uint32_t& doc, uint32_t& freq) {
  using Scan = typename BlockDecodeStorage<BS>::Scan;
  if (is_lrc(list.codec)) {
    doc = threadIdx.x < n ? lrc::value_at(list.docs.words, list.docs.endpoints, BS, block * BS + threadIdx.x) : 0;
  } else {
    decode_block<BS>(list.docs, list.codec, block, n, storage);
    const uint32_t gap = threadIdx.x < n ? storage.values[threadIdx.x] + 1 : 0;
    __syncthreads();
    uint32_t sum;
    Scan(storage.scan).InclusiveSum(gap, sum);
    doc = (block == 0 ? 0xFFFFFFFFu : list.block_last_docid[block - 1]) + sum;
    __syncthreads();
  }
  decode_block<BS>(list.freqs, list.freq_codec, block, n, storage);
  freq = threadIdx.x < n ? storage.values[threadIdx.x] + 1 : 0;
}

}  // namespace warp::gpu
