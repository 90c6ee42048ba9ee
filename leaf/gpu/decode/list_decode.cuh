// The helpers the query kernels share (BM25 in score units, block search, task lookup, the grid of
// the warp-per-block kernels) and the launchers of the whole-list decoding kernels, whose bodies
// are in list_decode.cu: a warp per selected compressed block on top of the warp decoders
// (warp_decode.cuh).
#pragma once
#include <algorithm>
#include <string>

#include "leaf/gpu/decode/block_decode.cuh"
#include "leaf/gpu/decode/warp_decode.cuh"
#include "common/util/cuda_check.cuh"
#include "common/util/status.hpp"

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
    if (tasks[mid].block_begin <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The first block of a list whose last docID is >= doc (block_count when none): the block that
// must hold doc if the list has it (Ding et al. §8.1 block selection).
__device__ __forceinline__ uint32_t block_for_doc(const uint32_t* block_last, uint32_t block_count, uint32_t doc) {
  uint32_t lo = 0, hi = block_count;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (block_last[mid] < doc)
      lo = mid + 1;
    else
      hi = mid;
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
    if (block_docs[mid] < doc)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < end && block_docs[lo] == doc ? static_cast<int64_t>(lo) : -1;
}

// Ao et al. Algorithm 1 on an LRC-coded list: the frequency of doc, or 0 when the list lacks it.
// The docID is searched in the compressed list; its frequency is read alone from ParaPFor.
__device__ __forceinline__ uint32_t lrc_frequency(const DeviceList& list, uint32_t doc) {
  uint32_t position;
  if (!lrc::find(list.docs.words, list.docs.endpoints, list.block_last_docid, list.count, list.block_size, doc,
                 position)) {
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

// Thread blocks of 8 warps for the warp-per-block kernels, and enough of them to fill the device
// (cached per kernel: a leaf's GPUs are of one kind); each warp then takes blocks grid-strided.
inline constexpr uint32_t kWarpsPerThreadBlock = 8;

template <auto kernel>
uint32_t resident_grid(uint32_t wanted) {
  static const uint32_t limit = [&] {
    int device = 0, sms = 0, per_sm = 0;
    WARP_CUDA_CHECK(cudaGetDevice(&device));
    WARP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    WARP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarpsPerThreadBlock * 32, 0));
    return static_cast<uint32_t>(std::max(1, sms * std::max(1, per_sm)));
  }();
  return std::min(wanted, limit);
}

// Decodes the selected blocks (all when `mask` is null) of a list, a warp per block, with the
// kernel compiled for its codec (list_decode.cu): writes docIDs and frequencies to their slots
// (block * block_size + i) or, with `accumulators`, adds BM25 scores in the query's units there
// (OR); `counters` (optional) gets the blocks and postings decoded.
void launch_decode(const DeviceList& list, const uint8_t* mask, uint32_t* docs, uint32_t* freqs, float* accumulators,
                   const float* norms, uint32_t doc_begin, float weight, Counters* counters, cudaStream_t stream);

// Decodes a sequence's blocks to the codec's values without the prefix sum: docID gaps (minus
// one) or frequencies (minus one), as CPU Codec::decode_all gives them (tests compare the two).
void launch_decode_values(const DeviceSequence& seq, uint32_t codec, uint32_t count, uint32_t block_count,
                          uint32_t block_size, uint32_t* out, cudaStream_t stream);

}  // namespace warp::gpu
