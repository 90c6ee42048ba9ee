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
  if (docs.allowed) {
    fill_kernel<<<grid_for(count), kThreads, 0, stream_>>>(norms_, count, INFINITY);
    WARP_CUDA_CHECK_LAUNCH();
  } else {
    WARP_CUDA_CHECK(cudaMemcpyAsync(norms_, base, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  const size_t n = docs.docs.size();
  if (n == 0) return;
  WARP_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&docs_), n * sizeof(uint32_t), stream_));
  // From pageable memory: the call returns once the source is staged, so `docs` may go after it.
  WARP_CUDA_CHECK(cudaMemcpyAsync(docs_, docs.docs.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice, stream_));
  scatter_kernel<<<grid_for(n), kThreads, 0, stream_>>>(norms_, base, docs_, n, doc_begin, count, docs.allowed);
  WARP_CUDA_CHECK_LAUNCH();
}

ConstrainedNorms::~ConstrainedNorms() {
  if (docs_ != nullptr) cudaFreeAsync(docs_, stream_);
  if (norms_ != nullptr) cudaFreeAsync(norms_, stream_);
}

}  // namespace warp::gpu
