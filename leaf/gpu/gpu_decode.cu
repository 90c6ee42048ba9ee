#include "leaf/gpu/gpu_decode.hpp"

#include <algorithm>

#include "common/util/status.hpp"
#include "leaf/gpu/list_decode.cuh"

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

double time_list_decode_ms(const DeviceIndex& index, const std::string& term, int repetitions) {
  const DeviceList list = must_find(index, term);
  DeviceArrays out(size_t{list.block_count} * list.block_size);
  cudaEvent_t start, stop;
  WARP_CUDA_CHECK(cudaEventCreate(&start));
  WARP_CUDA_CHECK(cudaEventCreate(&stop));
  launch_decode(list, nullptr, out.docs, out.freqs, nullptr, index.length_norms(), 0, 0, nullptr, 0);  // warm-up
  std::vector<float> times;
  for (int r = 0; r < repetitions; ++r) {
    WARP_CUDA_CHECK(cudaEventRecord(start));
    launch_decode(list, nullptr, out.docs, out.freqs, nullptr, index.length_norms(), 0, 0, nullptr, 0);
    WARP_CUDA_CHECK(cudaEventRecord(stop));
    WARP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    WARP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double device_copy_gbps(size_t bytes) {
  void *a = nullptr, *b = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&a, bytes));
  WARP_CUDA_CHECK(cudaMalloc(&b, bytes));
  WARP_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  WARP_CUDA_CHECK(cudaEventCreate(&start));
  WARP_CUDA_CHECK(cudaEventCreate(&stop));
  WARP_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<float> times;
  for (int r = 0; r < 20; ++r) {
    WARP_CUDA_CHECK(cudaEventRecord(start));
    WARP_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    WARP_CUDA_CHECK(cudaEventRecord(stop));
    WARP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    WARP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  std::sort(times.begin(), times.end());
  return 2.0 * bytes / (times[times.size() / 2] * 1e-3) / 1e9;
}

}  // namespace warp::gpu
