// Whole-list decoding kernels on top of the block decoders: a thread block per selected compressed
// block, writing docIDs and frequencies or adding BM25 scores into dense accumulators.
#pragma once
#include "leaf/gpu/block_decode.cuh"
#include "common/util/cuda_check.cuh"

namespace warp::gpu {

// The CPU's bm25_score, operation for operation.
__device__ __forceinline__ float bm25_dev(float weight, uint32_t tf, float norm) {
  const float f = static_cast<float>(tf);
  return weight * f / (f + norm);
}

// The CPU's bm25_units: a posting's score in the query's units (`weight` in units), an integer-
// valued float, so sums of them are exact in any order (bm25.hpp).
__device__ __forceinline__ float bm25_units_dev(float weight, uint32_t tf, float norm) {
  return ceilf(bm25_dev(weight, tf, norm));
}

// The CPU's bm25_unit_bound: a stored bound in a query's units; no postings (0) stay 0.
__device__ __forceinline__ float unit_bound_dev(float stored_bound, float bound_scale) {
  return stored_bound > 0 ? stored_bound * bound_scale * (1.0f + 1e-5f) + 1.0f : 0.0f;
}

// slots[slot] = max(slots[slot], value) for the live lanes of a warp whose `slot` is non-decreasing
// over the lanes (postings in docID order): one atomic per run of equal slots, after a segmented
// max by shuffles. Every lane of the warp calls it.
__device__ __forceinline__ void atomic_max_runs(uint32_t* slots, uint32_t slot, uint32_t value, bool live) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t key = live ? slot : 0xFFFFFFFFu;
  for (uint32_t offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other_key = __shfl_down_sync(0xFFFFFFFFu, key, offset);
    const uint32_t other_value = __shfl_down_sync(0xFFFFFFFFu, value, offset);
    if (lane + offset < 32 && other_key == key) value = max(value, other_value);
  }
  const uint32_t previous = __shfl_up_sync(0xFFFFFFFFu, key, 1);
  if (live && (lane == 0 || previous != key)) atomicMax(&slots[slot], value);
}

// Fused launches over several lists give each list a range of thread blocks from its
// `block_begin`: the index of the last of tasks[0..count) (sorted by block_begin) starting at or
// before thread block `block`.
template <class Task>
__device__ __forceinline__ uint32_t task_of_block(const Task* tasks, uint32_t count, uint32_t block) {
  uint32_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (tasks[mid].block_begin <= block) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// The first block of a list whose last docID is >= doc (block_count when none): the block that
// must hold doc if the list has it (Ding et al. §8.1 block selection).
__device__ __forceinline__ uint32_t block_for_doc(const uint32_t* block_last, uint32_t block_count, uint32_t doc) {
  uint32_t lo = 0, hi = block_count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (block_last[mid] < doc) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Position of doc in decoded block `block` (docIDs at block * block_size ...), or -1.
__device__ __forceinline__ int64_t find_in_block(const uint32_t* block_docs, uint32_t block, uint32_t block_size,
                                                 uint32_t list_count, uint32_t doc) {
  uint32_t lo = block * block_size;
  const uint32_t end = min(lo + block_size, list_count);
  uint32_t hi = end;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (block_docs[mid] < doc) lo = mid + 1; else hi = mid;
  }
  return lo < end && block_docs[lo] == doc ? static_cast<int64_t>(lo) : -1;
}

// Ao et al. Algorithm 1 on an LRC-coded list: the frequency of doc, or 0 when the list lacks it.
// The docID is searched in the compressed list; its frequency is read alone from ParaPFor.
__device__ __forceinline__ uint32_t lrc_frequency(const DeviceList& list, uint32_t doc) {
  uint32_t position;
  if (!lrc::find(list.docs.words, list.docs.endpoints, list.block_last_docid, list.count, list.block_size, doc, position)) {
    return 0;
  }
  const uint32_t block = position / list.block_size;
  const uint32_t n = min(list.block_size, list.count - block * list.block_size);
  return parapfor::value_at(list.freqs.words + list.freqs.endpoints[block], n, position % list.block_size) + 1;
}

struct Counters {
  unsigned long long blocks_decoded;
  unsigned long long postings_decoded;
  unsigned long long matches;
};

// Decodes the selected blocks (all when mask is null) of a list; writes docIDs and frequencies to
// their slots (block * BS + i) or, with `accumulators`, adds BM25 scores there (OR).
template <int BS>
__global__ void decode_list_kernel(DeviceList list, const uint8_t* block_mask, uint32_t* out_docs, uint32_t* out_freqs,
                                   float* accumulators, const float* norms, uint32_t doc_begin, float weight,
                                   Counters* counters) {
  const uint32_t block = blockIdx.x;
  if (block_mask != nullptr && block_mask[block] == 0) return;  // uniform over the thread block
  __shared__ BlockDecodeStorage<BS> storage;
  const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
  uint32_t doc, freq;
  decode_postings<BS>(list, block, n, storage, doc, freq);
  if (threadIdx.x < n) {
    if (accumulators != nullptr) {
      atomicAdd(&accumulators[doc - doc_begin], bm25_units_dev(weight, freq, norms[doc - doc_begin]));
    } else {
      out_docs[block * BS + threadIdx.x] = doc;
      out_freqs[block * BS + threadIdx.x] = freq;
    }
  }
  if (threadIdx.x == 0 && counters != nullptr) {
    atomicAdd(&counters->blocks_decoded, 1ull);
    atomicAdd(&counters->postings_decoded, static_cast<unsigned long long>(n));
  }
}

__host__ __device__ inline bool is_bp(uint32_t codec) {
  return codec == static_cast<uint32_t>(CodecId::kBp128) || codec == static_cast<uint32_t>(CodecId::kBp256);
}

// One warp decodes BP block `block` of a list (docIDs and frequencies, both BP): lane i gets
// postings i * BS/32 .. (i + 1) * BS/32 - 1 (docs[j], freqs[j]; valid where the index is < n), the
// docIDs by a prefix sum of the gaps over the lane's values and then by shuffles across the warp.
// No barrier: the warps of a thread block decode different blocks at once. Every lane calls it.
template <int BS>
__device__ __forceinline__ uint32_t warp_decode_bp(const DeviceList& list, uint32_t block, uint32_t (&docs)[BS / 32],
                                                   uint32_t (&freqs)[BS / 32]) {
  constexpr uint32_t kPerLane = BS / 32;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
  const bool full = n == BS;
  auto packed = [&](const DeviceSequence& seq, uint32_t& bits) {
    const uint32_t begin = seq.endpoints[block];
    bits = full ? (seq.endpoints[block + 1] - begin) * 32 / BS : seq.words[begin];
    return seq.words + begin + (full ? 0 : 1);
  };
  uint32_t doc_bits, freq_bits;
  const uint32_t* doc_words = packed(list.docs, doc_bits);
  const uint32_t* freq_words = packed(list.freqs, freq_bits);
  uint32_t sum = 0;
  for (uint32_t j = 0; j < kPerLane; ++j) {
    const uint32_t index = lane * kPerLane + j;
    docs[j] = index < n ? fmt::extract(doc_words, index, doc_bits) + 1 : 0;  // gap + 1
    freqs[j] = index < n ? fmt::extract(freq_words, index, freq_bits) + 1 : 0;
    sum += docs[j];
  }
  uint32_t inclusive = sum;
  for (uint32_t offset = 1; offset < 32; offset <<= 1) {
    const uint32_t other = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  uint32_t doc = (block == 0 ? 0xFFFFFFFFu : list.block_last_docid[block - 1]) + inclusive - sum;
  for (uint32_t j = 0; j < kPerLane; ++j) docs[j] = doc += docs[j];
  return n;
}

// decode_list_kernel for BP lists: a warp per block (warp_decode_bp), 16-byte stores of
// consecutive docIDs and frequencies; the block counters once per thread block.
template <int BS>
__global__ void __launch_bounds__(256) decode_bp_list_kernel(DeviceList list, const uint8_t* block_mask, uint32_t* out_docs,
                                                             uint32_t* out_freqs, float* accumulators, const float* norms,
                                                             uint32_t doc_begin, float weight, Counters* counters) {
  constexpr uint32_t kPerLane = BS / 32;
  __shared__ unsigned long long decoded_blocks, decoded_postings;
  if (threadIdx.x == 0) decoded_blocks = decoded_postings = 0;
  __syncthreads();
  const uint32_t block = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const uint32_t lane = threadIdx.x & 31u;
  if (block < list.block_count && (block_mask == nullptr || block_mask[block] != 0)) {  // uniform per warp
    uint32_t docs[kPerLane], freqs[kPerLane];
    const uint32_t n = warp_decode_bp<BS>(list, block, docs, freqs);
    const uint32_t first = lane * kPerLane;
    if (accumulators != nullptr) {
      for (uint32_t j = 0; j < kPerLane; ++j) {
        if (first + j < n) atomicAdd(&accumulators[docs[j] - doc_begin], bm25_units_dev(weight, freqs[j], norms[docs[j] - doc_begin]));
      }
    } else if (n == BS) {
      auto* d = reinterpret_cast<uint4*>(out_docs + size_t{block} * BS + first);
      auto* f = reinterpret_cast<uint4*>(out_freqs + size_t{block} * BS + first);
      for (uint32_t j = 0; j < kPerLane; j += 4) {
        d[j / 4] = make_uint4(docs[j], docs[j + 1], docs[j + 2], docs[j + 3]);
        f[j / 4] = make_uint4(freqs[j], freqs[j + 1], freqs[j + 2], freqs[j + 3]);
      }
    } else {
      for (uint32_t j = 0; j < kPerLane && first + j < n; ++j) {
        out_docs[size_t{block} * BS + first + j] = docs[j];
        out_freqs[size_t{block} * BS + first + j] = freqs[j];
      }
    }
    if (lane == 0 && counters != nullptr) {
      atomicAdd(&decoded_blocks, 1ull);
      atomicAdd(&decoded_postings, static_cast<unsigned long long>(n));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && counters != nullptr && decoded_blocks != 0) {
    atomicAdd(&counters->blocks_decoded, decoded_blocks);
    atomicAdd(&counters->postings_decoded, decoded_postings);
  }
}

// Decodes a sequence's blocks to the codec's values without the prefix sum: docID gaps (minus
// one) or frequencies (minus one), as CPU Codec::decode_all gives them.
template <int BS>
__global__ void decode_values_kernel(DeviceSequence seq, uint32_t codec, uint32_t count, uint32_t* out) {
  const uint32_t block = blockIdx.x;
  __shared__ BlockDecodeStorage<BS> storage;
  const uint32_t n = min(static_cast<uint32_t>(BS), count - block * BS);
  decode_block<BS>(seq, codec, block, n, storage);
  if (threadIdx.x < n) out[block * BS + threadIdx.x] = storage.values[threadIdx.x];
}

inline void launch_decode(const DeviceList& list, const uint8_t* mask, uint32_t* docs, uint32_t* freqs, float* accumulators,
                   const float* norms, uint32_t doc_begin, float weight, Counters* counters, cudaStream_t stream) {
  if (is_bp(list.codec) && is_bp(list.freq_codec)) {  // a warp per block, 8 blocks a thread block
    const uint32_t grid = (list.block_count + 7) / 8;
    if (grid == 0) return;
    if (list.block_size == 256) {
      decode_bp_list_kernel<256><<<grid, 256, 0, stream>>>(list, mask, docs, freqs, accumulators, norms, doc_begin, weight, counters);
    } else {
      decode_bp_list_kernel<128><<<grid, 256, 0, stream>>>(list, mask, docs, freqs, accumulators, norms, doc_begin, weight, counters);
    }
    WARP_CUDA_CHECK_LAUNCH();
    return;
  }
  if (list.block_size == 256) {
    decode_list_kernel<256><<<list.block_count, 256, 0, stream>>>(list, mask, docs, freqs, accumulators, norms,
                                                                  doc_begin, weight, counters);
  } else {
    decode_list_kernel<128><<<list.block_count, 128, 0, stream>>>(list, mask, docs, freqs, accumulators, norms,
                                                                  doc_begin, weight, counters);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
