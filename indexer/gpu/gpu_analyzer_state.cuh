// What gpu_analyzer.cu (tokens, stems, a chunk's inversion) and gpu_analyzer_run.cu (the run kept
// on the device for the parser's indexer) share: the analyzer's device state and launch helpers.
// Private to indexer/gpu.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "common/util/cuda_check.cuh"
#include "indexer/gpu/device_array.cuh"
#include "indexer/gpu/gpu_analyzer.hpp"

namespace warp::pipeline {

inline constexpr int kThreads = 256;
inline unsigned blocks_for(size_t n) {
  return static_cast<unsigned>(std::max<size_t>((n + kThreads - 1) / kThreads, 1));
}

// Pinned host memory that only grows (its contents are not kept).
template <typename T>
void reserve_pinned(T*& data, size_t& capacity, size_t n) {
  if (n <= capacity) return;
  if (data != nullptr) cudaFreeHost(data);
  data = nullptr;
  capacity = std::max<size_t>(n, capacity + capacity / 2);
  WARP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&data), capacity * sizeof(T), cudaHostAllocDefault));
}

struct GpuAnalyzer::State {
  cudaStream_t stream = nullptr;
  DeviceArray<unsigned char> text, start_flags, non_ascii, temp;
  DeviceArray<uint32_t> doc_begin, starts, values;
  DeviceArray<int> count;
  DeviceArray<unsigned long long> learned, keys, sorted_keys, run_keys;
  DeviceArray<uint32_t> patches, run_counts, distinct;
  DeviceArray<int> runs;
  // The run kept for the indexer: keys and frequencies, each with the radix sort's second buffer
  // (the ordered pairs go to the keys' spare one), segment heads, their stems and output places.
  DeviceArray<unsigned long long> kept_keys[2];
  DeviceArray<uint32_t> kept_freqs[2], heads, head_stems, out_begins;
  DeviceArray<unsigned char> head_flags, run_temp;
  DeviceArray<int> head_count;
  DeviceArray<unsigned long long> noted, head_prefixes[2];
  DeviceArray<uint32_t> head_indexes[2];
  int prefixes_buffer = 0, indexes_buffer = 0;          // which of the two hold the stems ordered by prefix
  int sorted_keys_buffer = 0, sorted_freqs_buffer = 0;  // which of the two hold the sorted run
  int* head_count_host = nullptr;                       // pinned
  size_t flags_capacity = 0, tokens_capacity = 0, values_capacity = 0, keys_capacity = 0, freqs_capacity = 0,
         distinct_capacity = 0;
  int* count_host = nullptr;  // pinned: the chunk's tokens
  int* runs_host = nullptr;   // pinned: the inversion's (stem, document) runs
  ~State() {
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (count_host != nullptr) cudaFreeHost(count_host);
    if (runs_host != nullptr) cudaFreeHost(runs_host);
    if (head_count_host != nullptr) cudaFreeHost(head_count_host);
  }
};

}  // namespace warp::pipeline
