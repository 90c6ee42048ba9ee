#include "leaf/gpu/index/constrained_norms.cuh"

#include <algorithm>
#include <cmath>

#include "common/util/cuda_check.cuh"

namespace warp::gpu {
namespace {

constexpr uint32_t kThreads = 256;
uint32_t grid_for(size_t n) { return static_cast<uint32_t>(std::max<size_t>(1, (n + kThreads - 1) / kThreads)); }

__global__ void fill_kernel(float* out, size_t count, float value) {
  const size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < count) out[i] = value;
}

// Allowed: out[d] = base[d] for the listed documents; kept out: out[d] = ∞.
__global__ void scatter_kernel(float* out, const float* base, const uint32_t* docs, size_t n, uint32_t doc_begin,
                               size_t count, bool allowed) {
  const size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const size_t d = docs[i] - doc_begin;
  if (d < count) out[d] = allowed ? base[d] : INFINITY;
}

// Kept out where its bit is set: out[d] = ∞, else base[d].
__global__ void bits_kernel(float* out, const float* base, const uint64_t* bits, size_t count) {
  const size_t d = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (d < count) out[d] = (bits[d / 64] >> (d % 64) & 1) ? INFINITY : base[d];
}

}  // namespace

ConstrainedNorms::ConstrainedNorms(const ConstraintDocs& docs, const float* base, size_t count, uint32_t doc_begin,
                                   cudaStream_t stream)
    : stream_(stream) {
  WARP_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&norms_), count * sizeof(float), stream_));
  try {
    fill(docs, base, count, doc_begin);
  } catch (...) {
    this->~ConstrainedNorms();
    throw;
  }
}

void ConstrainedNorms::fill(const ConstraintDocs& docs, const float* base, size_t count, uint32_t doc_begin) {
  if (!docs.kept_out.empty()) {  // a filter's: the bits up, then each document's norm or ∞
    const size_t words = std::min(docs.kept_out.size(), (count + 63) / 64);
    WARP_CUDA_CHECK(cudaMallocAsync(&upload_, words * sizeof(uint64_t), stream_));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(upload_, docs.kept_out.data(), words * sizeof(uint64_t), cudaMemcpyHostToDevice, stream_));
    bits_kernel<<<grid_for(std::min(count, words * 64)), kThreads, 0, stream_>>>(
        norms_, base, static_cast<const uint64_t*>(upload_), std::min(count, words * 64));
    WARP_CUDA_CHECK_LAUNCH();
    return;
  }
  if (docs.allowed) {
    fill_kernel<<<grid_for(count), kThreads, 0, stream_>>>(norms_, count, INFINITY);
    WARP_CUDA_CHECK_LAUNCH();
  } else {
    WARP_CUDA_CHECK(cudaMemcpyAsync(norms_, base, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  const size_t n = docs.docs.size();
  if (n == 0) return;
  WARP_CUDA_CHECK(cudaMallocAsync(&upload_, n * sizeof(uint32_t), stream_));
  // From pageable memory: the call returns once the source is staged, so `docs` may go after it.
  WARP_CUDA_CHECK(cudaMemcpyAsync(upload_, docs.docs.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice, stream_));
  scatter_kernel<<<grid_for(n), kThreads, 0, stream_>>>(norms_, base, static_cast<const uint32_t*>(upload_), n,
                                                        doc_begin, count, docs.allowed);
  WARP_CUDA_CHECK_LAUNCH();
}

ConstrainedNorms::~ConstrainedNorms() {
  if (upload_ != nullptr) cudaFreeAsync(upload_, stream_);
  if (norms_ != nullptr) cudaFreeAsync(norms_, stream_);
}

std::shared_ptr<const float> FilterNormsCache::get(const std::string& key, const std::function<ConstraintDocs()>& make,
                                                   const float* base, size_t count, uint32_t doc_begin,
                                                   cudaStream_t stream) {
  std::shared_ptr<const float> dropped;  // out of the cache: let go after the lock below
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first != key) continue;
    entries_.splice(entries_.begin(), entries_, it);
    return entries_.front().second;
  }
  float* buffer = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffer), count * sizeof(float)));
  // Freed on the cache's device whichever thread lets the last holder go (a query holds its norms
  // until its results are back on the host: its kernels are done by then).
  std::shared_ptr<const float> norms(buffer, [device = device_](const float* held) {
    int current = 0;
    cudaGetDevice(&current);
    cudaSetDevice(device);
    cudaFree(const_cast<float*>(held));
    cudaSetDevice(current);
  });
  {
    const ConstrainedNorms made(make(), base, count, doc_begin, stream);
    WARP_CUDA_CHECK(cudaMemcpyAsync(buffer, made.get(), count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    // Whole before another stream's query may find it.
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  entries_.emplace_front(key, norms);
  if (entries_.size() > capacity_) {
    dropped = std::move(entries_.back().second);
    entries_.pop_back();
  }
  return norms;
}

}  // namespace warp::gpu
