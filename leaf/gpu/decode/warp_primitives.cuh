// What every warp-per-block decoder shares (warp_decode.cuh): where a lane's values sit in a block,
// the warp's shared scratch, a warp prefix sum, bit unpacking, and a block's trip through scratch.
#pragma once
#include <cstdint>

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

}  // namespace warp::gpu
