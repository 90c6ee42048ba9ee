#include "leaf/gpu/decode/list_decode.cuh"

namespace warp::gpu {
namespace {

// Per-block PForDelta and ParaPFor find a block's slots through two dependent loads (its endpoint,
// then its header) before the slots themselves: three memory latencies a block. Their whole-list
// kernel loads where the next block begins while it decodes this one and then asks L2 for its lines
// (`prefetch.global.L2`, nothing held in registers), so the next block's chain hits L2 (H100, 2^26
// postings: per-block PForDelta 59% -> 64-66% of copy bandwidth, ParaPFor 61% -> 64-65%; BP,
// whose chain is one load shorter, measured slower with it: 86% -> 81%).
__host__ __device__ constexpr bool prefetches_next_block(uint32_t codec) {
  return codec == static_cast<uint32_t>(CodecId::kPforBlock) || codec == static_cast<uint32_t>(CodecId::kParaPfor);
}

// Where a block's docIDs and frequencies begin (kNoBlock: nothing to prefetch). Two registers
// only: the ends are not held (with them both kernels spilled at their register bound).
struct NextBlock {
  static constexpr uint32_t kNoBlock = 0xFFFFFFFFu;
  uint32_t doc_begin = kNoBlock, freq_begin = kNoBlock;
};

// Loads where `block` of a list (of a prefetches_next_block codec) begins, unless it is past the
// list's end or not selected.
__device__ __forceinline__ NextBlock next_block_begin(const DeviceList& list, const uint8_t* block_mask,
                                                      uint32_t block) {
  NextBlock next;
  if (block < list.block_count && (block_mask == nullptr || block_mask[block] != 0)) {
    next.doc_begin = list.docs.endpoints[block], next.freq_begin = list.freqs.endpoints[block];
  }
  return next;
}

// Lanes 0-1 ask L2 for the two 128-byte lines from where the block's docIDs begin, lanes 2-3 for
// its frequencies' (a block of up to ~250 bytes, or its start and the next block's); each address
// within the sequence's words (their count is a kernel parameter: loading the last endpoint
// instead, a load per block, measured 2-4 points slower).
__device__ __forceinline__ void prefetch_block(const DeviceList& list, const NextBlock& next) {
  const uint32_t lane = threadIdx.x & 31u;
  if (next.doc_begin == NextBlock::kNoBlock || lane >= 4) return;
  const bool docs = lane < 2;
  const uint32_t at = (docs ? next.doc_begin : next.freq_begin) + (lane % 2) * 32;
  if (at < (docs ? list.docs.word_count : list.freqs.word_count)) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"((docs ? list.docs.words : list.freqs.words) + at));
  }
}

// Decodes the selected blocks (all when mask is null) of a list, a warp per block
// (warp_decode_postings): writes docIDs and frequencies to their slots (block * BS + i) with
// 16-byte stores or, with `accumulators`, adds BM25 scores there (OR); the block counters once per
// thread block. kMinResident thread blocks per multiprocessor bound the registers (decode_min_resident).
template <int BS, uint32_t kCodec, uint32_t kMinResident = 1>
__global__ void __launch_bounds__(kWarpsPerThreadBlock * 32, kMinResident)
    decode_list_kernel(DeviceList list, const uint8_t* block_mask, uint32_t* out_docs, uint32_t* out_freqs,
                       float* accumulators, const float* norms, uint32_t doc_begin, float weight, Counters* counters) {
  constexpr uint32_t kPerLane = BS / 32;
  __shared__ WarpScratch<BS> scratch[kWarpsPerThreadBlock];
  __shared__ unsigned long long decoded_blocks, decoded_postings;
  if (threadIdx.x == 0) decoded_blocks = decoded_postings = 0;
  __syncthreads();
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  const uint32_t stride = gridDim.x * kWarpsPerThreadBlock;
  for (uint32_t block = blockIdx.x * kWarpsPerThreadBlock + warp; block < list.block_count; block += stride) {
    if (block_mask != nullptr && block_mask[block] == 0) continue;  // uniform per warp
    NextBlock next;
    if constexpr (prefetches_next_block(kCodec)) next = next_block_begin(list, block_mask, block + stride);
    uint32_t docs[kPerLane], freqs[kPerLane];
    const uint32_t n = warp_decode_postings<BS, kCodec>(list, block, docs, freqs, scratch[warp]);
    if constexpr (prefetches_next_block(kCodec)) prefetch_block(list, next);
    if (accumulators != nullptr) {
      for (uint32_t j = 0; j < kPerLane; ++j) {
        if (WarpLayout<BS>::index(lane, j) < n) {
          atomicAdd(&accumulators[docs[j] - doc_begin], bm25_units_dev(weight, freqs[j], norms[docs[j] - doc_begin]));
        }
      }
    } else if (n == BS) {
      for (uint32_t g = 0; g < BS / 128; ++g) {
        const size_t at = size_t{block} * BS + g * 128 + lane * 4;
        *reinterpret_cast<uint4*>(out_docs + at) =
            make_uint4(docs[4 * g], docs[4 * g + 1], docs[4 * g + 2], docs[4 * g + 3]);
        *reinterpret_cast<uint4*>(out_freqs + at) =
            make_uint4(freqs[4 * g], freqs[4 * g + 1], freqs[4 * g + 2], freqs[4 * g + 3]);
      }
    } else {
      for (uint32_t j = 0; j < kPerLane; ++j) {
        const uint32_t index = WarpLayout<BS>::index(lane, j);
        if (index < n) out_docs[size_t{block} * BS + index] = docs[j], out_freqs[size_t{block} * BS + index] = freqs[j];
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

// launch_decode_values' kernel: a warp per block.
template <int BS>
__global__ void __launch_bounds__(kWarpsPerThreadBlock * 32)
    decode_values_kernel(DeviceSequence seq, uint32_t codec, uint32_t count, uint32_t block_count, uint32_t* out) {
  __shared__ WarpScratch<BS> scratch[kWarpsPerThreadBlock];
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  const uint32_t block = blockIdx.x * kWarpsPerThreadBlock + warp;
  if (block >= block_count) return;  // uniform per warp
  const uint32_t n = min(static_cast<uint32_t>(BS), count - block * BS);
  uint32_t values[BS / 32];
  warp_decode_values<BS>(seq, codec, block, n, values, scratch[warp]);
  for (uint32_t j = 0; j < BS / 32; ++j) {
    const uint32_t index = WarpLayout<BS>::index(lane, j);
    if (index < n) out[size_t{block} * BS + index] = values[j];
  }
}

// Thread blocks of the whole-list kernel resident per multiprocessor, per codec: the register
// bound that decoded fastest at 2^26 postings on the H100 (tests/bench/results/gpu-queries.md). 8 (32
// registers, every warp slot filled) suits the leanest decoders; the PFor family, VByte and LRC
// keep more values in flight per warp and do best between 5 and 6 (ParaPFor 5 since its first
// exceptions are extracted where patched); Rice unbounded (64 registers: every load of a block in
// flight measured faster than more warps resident).
constexpr uint32_t decode_min_resident(uint32_t codec) {
  switch (static_cast<CodecId>(codec)) {
    case CodecId::kBp128:
    case CodecId::kPforDing:
      return 8;
    case CodecId::kPforBlock:
    case CodecId::kParaPfor:
      return 5;
    case CodecId::kBp256:
    case CodecId::kVByte:
    case CodecId::kLrc:
    case CodecId::kLrcSeg:
    case CodecId::kSegLrc:
    case CodecId::kHsLrc:
      return 6;
    default:
      return 1;
  }
}

template <int BS, uint32_t kCodec>
void launch_decode_list(const DeviceList& list, const uint8_t* mask, uint32_t* docs, uint32_t* freqs,
                        float* accumulators, const float* norms, uint32_t doc_begin, float weight, Counters* counters,
                        cudaStream_t stream) {
  if (list.block_size != BS)
    throw Error("a list of codec " + std::to_string(list.codec) + " with blocks of " + std::to_string(list.block_size));
  constexpr uint32_t kMinResident = decode_min_resident(kCodec);
  const uint32_t wanted = (list.block_count + kWarpsPerThreadBlock - 1) / kWarpsPerThreadBlock;
  decode_list_kernel<BS, kCodec, kMinResident>
      <<<resident_grid<decode_list_kernel<BS, kCodec, kMinResident>>(wanted), kWarpsPerThreadBlock * 32, 0, stream>>>(
          list, mask, docs, freqs, accumulators, norms, doc_begin, weight, counters);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace

// A kernel compiled for the list's codec (kCodec) where its frequencies use the usual codec, else
// the kernel that follows the codecs at run time.
void launch_decode(const DeviceList& list, const uint8_t* mask, uint32_t* docs, uint32_t* freqs, float* accumulators,
                   const float* norms, uint32_t doc_begin, float weight, Counters* counters, cudaStream_t stream) {
  if (list.block_count == 0) return;
  const auto go = [&]<int BS, uint32_t kCodec>() {
    launch_decode_list<BS, kCodec>(list, mask, docs, freqs, accumulators, norms, doc_begin, weight, counters, stream);
  };
  if (list.freq_codec != frequency_codec_of(list.codec)) {
    if (list.block_size == 256)
      go.template operator()<256, kAnyCodec>();
    else
      go.template operator()<128, kAnyCodec>();
    return;
  }
  switch (static_cast<CodecId>(list.codec)) {
    case CodecId::kBp128:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kBp128)>();
    case CodecId::kBp256:
      return go.template operator()<256, static_cast<uint32_t>(CodecId::kBp256)>();
    case CodecId::kVByte:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kVByte)>();
    case CodecId::kPforDing:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kPforDing)>();
    case CodecId::kPforBlock:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kPforBlock)>();
    case CodecId::kRice:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kRice)>();
    case CodecId::kParaPfor:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kParaPfor)>();
    case CodecId::kLrc:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kLrc)>();
    case CodecId::kLrcSeg:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kLrcSeg)>();
    case CodecId::kSegLrc:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kSegLrc)>();
    case CodecId::kHsLrc:
      return go.template operator()<128, static_cast<uint32_t>(CodecId::kHsLrc)>();
  }
  throw Error("no GPU decoder for codec " + std::to_string(list.codec));
}

void launch_decode_values(const DeviceSequence& seq, uint32_t codec, uint32_t count, uint32_t block_count,
                          uint32_t block_size, uint32_t* out, cudaStream_t stream) {
  const uint32_t grid = (block_count + kWarpsPerThreadBlock - 1) / kWarpsPerThreadBlock;
  if (grid == 0) return;
  if (block_size == 256) {
    decode_values_kernel<256><<<grid, kWarpsPerThreadBlock * 32, 0, stream>>>(seq, codec, count, block_count, out);
  } else {
    decode_values_kernel<128><<<grid, kWarpsPerThreadBlock * 32, 0, stream>>>(seq, codec, count, block_count, out);
  }
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
