// Plain descriptors of one posting list in GPU memory, passed to kernels by value.
#pragma once
#include <cstdint>

namespace warp::gpu {

struct DeviceSequence {
  const uint32_t* endpoints = nullptr;
  const uint32_t* words = nullptr;
  const uint32_t* exception_positions = nullptr;  // pfor-ding only: absolute positions
  const uint32_t* exception_high = nullptr;       // pfor-ding only: high bits above the width
};

struct DeviceList {
  uint32_t count = 0;
  uint32_t codec = 0;       // CodecId of the docIDs
  uint32_t freq_codec = 0;  // CodecId of the frequencies
  uint32_t block_count = 0;
  uint32_t block_size = 0;
  const uint32_t* block_last_docid = nullptr;  // device pointers into the arena
  const float* block_max_score = nullptr;      // BM25 upper bound of each block (block-max)
  DeviceSequence docs;
  DeviceSequence freqs;
};

}  // namespace warp::gpu
