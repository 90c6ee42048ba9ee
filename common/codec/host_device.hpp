// Functions of a codec's format that the CPU and the GPU must compute identically are written once,
// as WARP_HD inline functions: plain inline for the host compiler, __host__ __device__ under nvcc.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define WARP_HD __host__ __device__ __forceinline__
#else
#define WARP_HD inline
#endif

namespace warp::fmt {

WARP_HD uint32_t extract(const uint32_t* in, uint64_t index, uint32_t bits) {
  if (bits == 0) return 0;
  const uint64_t bit = index * bits;
  const uint64_t word = bit >> 5;
  const uint32_t offset = bit & 31;
  uint64_t window = in[word];
  if (offset + bits > 32) window |= static_cast<uint64_t>(in[word + 1]) << 32;
  return static_cast<uint32_t>(window >> offset) & (bits >= 32 ? 0xFFFFFFFFu : ((1u << bits) - 1));
}

WARP_HD float as_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

WARP_HD int64_t read_i64(const uint32_t* w) {
  return static_cast<int64_t>(static_cast<uint64_t>(w[0]) | (static_cast<uint64_t>(w[1]) << 32));
}

}  // namespace warp::fmt
