#include "tests/support/gpu_decode.hpp"

#include <algorithm>

#include "common/util/status.hpp"
#include "leaf/gpu/device/event_timer.cuh"
#include "leaf/gpu/decode/list_decode.cuh"

namespace warp::gpu {
namespace {

struct DeviceArrays {
  uint32_t* docs = nullptr;
  uint32_t* freqs = nullptr;
  explicit DeviceArrays(size_t n) {
    WARP_CUDA_CHECK(cudaMalloc(&docs, n * sizeof(uint32_t)));
    WARP_CUDA_CHECK(cudaMalloc(&freqs, n * sizeof(uint32_t)));
  }
  ~DeviceArrays() {
    cudaFree(docs);
    cudaFree(freqs);
  }
};

DeviceList must_find(const DeviceIndex& index, const std::string& term) {
  DeviceList list;
  if (!index.find(term, list)) throw Error("term '" + term + "' is not in the partition");
  return list;
}

}  // namespace

std::vector<Posting> decode_list_on_gpu(const DeviceIndex& index, const std::string& term) {
  const DeviceList list = must_find(index, term);
  const size_t slots = size_t{list.block_count} * list.block_size;
  DeviceArrays out(slots);
  // Poison the output: every slot the decoder should write is checked by the caller.
  WARP_CUDA_CHECK(cudaMemset(out.docs, 0xAB, slots * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMemset(out.freqs, 0xAB, slots * sizeof(uint32_t)));
  launch_decode(list, nullptr, out.docs, out.freqs, nullptr, index.length_norms(), 0, 0, nullptr, 0);
  WARP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> docs(list.count), freqs(list.count);
  WARP_CUDA_CHECK(cudaMemcpy(docs.data(), out.docs, list.count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  WARP_CUDA_CHECK(cudaMemcpy(freqs.data(), out.freqs, list.count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  std::vector<Posting> postings(list.count);
  for (size_t i = 0; i < list.count; ++i) postings[i] = {docs[i], freqs[i]};
  return postings;
}

std::vector<uint32_t> decode_values_on_gpu(const DeviceIndex& index, const std::string& term, bool frequencies) {
  const DeviceList list = must_find(index, term);
  DeviceArrays out(size_t{list.block_count} * list.block_size);
  const DeviceSequence& seq = frequencies ? list.freqs : list.docs;
  const uint32_t codec = frequencies ? list.freq_codec : list.codec;
  if (list.block_count == 0) return {};
  launch_decode_values(seq, codec, list.count, list.block_count, list.block_size, out.docs, 0);
  WARP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> values(list.count);
  WARP_CUDA_CHECK(cudaMemcpy(values.data(), out.docs, list.count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  return values;
}

double time_list_decode_ms(const DeviceIndex& index, const std::string& term, int repetitions) {
  const DeviceList list = must_find(index, term);
  DeviceArrays out(size_t{list.block_count} * list.block_size);
  return median_event_ms(
      [&] { launch_decode(list, nullptr, out.docs, out.freqs, nullptr, index.length_norms(), 0, 0, nullptr, 0); },
      repetitions);
}

double device_copy_gbps(size_t bytes) {
  void *a = nullptr, *b = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&a, bytes));
  WARP_CUDA_CHECK(cudaMalloc(&b, bytes));
  WARP_CUDA_CHECK(cudaMemset(a, 1, bytes));
  const double ms =
      median_event_ms([&] { WARP_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 20);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

}  // namespace warp::gpu
