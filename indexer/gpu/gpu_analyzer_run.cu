// The parser's run kept on the device (GpuAnalyzer::reserve_run ... order_run_stems): chunks'
// postings appended, sorted by (stem, document), laid out for the indexer's spill and fetched.
#include <algorithm>
#include <chrono>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "common/util/status.hpp"
#include "indexer/gpu/gpu_analyzer_state.cuh"

namespace warp::pipeline {
namespace {

// The chunk's postings (stem id << 32 | document in the chunk) onto the run's, docIDs from `base`.
__global__ void append_postings(const unsigned long long* keys, const uint32_t* freqs, uint32_t n, uint32_t base,
                                unsigned long long* run_keys, uint32_t* run_freqs) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  run_keys[i] = keys[i] + base;
  run_freqs[i] = freqs[i];
}

// Per posting of the sorted run: whether it is its stem's first.
__global__ void mark_heads(const unsigned long long* keys, uint32_t n, unsigned char* flags) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) flags[i] = i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32);
}

__global__ void head_stems(const unsigned long long* keys, const uint32_t* heads, uint32_t count, uint32_t* stems) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < count) stems[j] = static_cast<uint32_t>(keys[heads[j]] >> 32);
}

// A warp a stem: its postings to their place, as (docID, frequency) pairs.
__global__ void place_postings(const unsigned long long* keys, const uint32_t* freqs, uint32_t n, const uint32_t* heads,
                               uint32_t count, const uint32_t* out_begins, unsigned long long* out) {
  const uint32_t j = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (j >= count) return;
  const uint32_t begin = heads[j], end = j + 1 < count ? heads[j + 1] : n, to = out_begins[j];
  for (uint32_t i = begin + lane; i < end; i += 32) {
    out[to + (i - begin)] = (keys[i] & 0xFFFFFFFFull) | (static_cast<unsigned long long>(freqs[i]) << 32);
  }
}

__global__ void write_prefixes(const unsigned long long* noted, uint32_t n, unsigned long long* prefixes) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) prefixes[noted[2 * i]] = noted[2 * i + 1];
}

// Per stem of the run: its prefix and its index, to be sorted by prefix.
__global__ void gather_prefixes(const uint32_t* stems, uint32_t count, const unsigned long long* prefixes,
                                unsigned long long* keys, uint32_t* indexes) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= count) return;
  keys[j] = prefixes[stems[j]];
  indexes[j] = j;
}

}  // namespace

void GpuAnalyzer::reserve_run(size_t postings, size_t stems, size_t parsers) {
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  size_t free_bytes = 0, total_bytes = 0;
  WARP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  constexpr size_t kBytesPerPosting =
      2 * sizeof(unsigned long long) + 2 * sizeof(uint32_t) + 1 + 1;  // keys, frequencies, flags, sort
  postings = std::max<size_t>(std::min(postings, total_bytes / 2 / std::max<size_t>(parsers, 1) / kBytesPerPosting), 1);
  if (postings >= (size_t{1} << 31)) throw Error("GPU analysis: a run of 2^31 postings or more");
  for (auto& a : s.kept_keys) a.reserve(postings);
  for (auto& a : s.kept_freqs) a.reserve(postings);
  for (auto* a : {&s.heads, &s.head_stems, &s.out_begins}) a->reserve(std::min(postings, std::max<size_t>(stems, 1)));
  s.head_flags.reserve(postings);
  s.head_count.reserve(1);
  const size_t most_stems = std::min(postings, std::max<size_t>(stems, 1));
  for (auto& a : s.head_prefixes) a.reserve(most_stems);
  for (auto& a : s.head_indexes) a.reserve(most_stems);
  size_t sort_bytes = 0, select_bytes = 0, order_bytes = 0;
  {
    cub::DoubleBuffer<unsigned long long> keys(s.head_prefixes[0].data, s.head_prefixes[1].data);
    cub::DoubleBuffer<uint32_t> indexes(s.head_indexes[0].data, s.head_indexes[1].data);
    WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, order_bytes, keys, indexes, most_stems, 0, 64, s.stream));
  }
  cub::DoubleBuffer<unsigned long long> keys(s.kept_keys[0].data, s.kept_keys[1].data);
  cub::DoubleBuffer<uint32_t> freqs(s.kept_freqs[0].data, s.kept_freqs[1].data);
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, freqs, postings, 0, 64, s.stream));
  thrust::counting_iterator<uint32_t> positions(0);
  WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, positions, s.head_flags.data, s.heads.data,
                                             s.head_count.data, postings, s.stream));
  s.run_temp.reserve(std::max({sort_bytes, select_bytes, order_bytes, size_t{1}}));
  if (s.head_count_host == nullptr) {
    WARP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&s.head_count_host), sizeof(int), cudaHostAllocDefault));
  }
  if (run_fetched_ == nullptr) {
    WARP_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&run_fetched_), kRunFetch * 2 * sizeof(uint32_t), cudaHostAllocDefault));
  }
  run_capacity_ = postings;
}

bool GpuAnalyzer::append_to_run(uint32_t base) {
  if (postings_ == 0) return true;
  if (run_size_ + postings_ > run_capacity_) return false;
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  const uint32_t n = static_cast<uint32_t>(postings_);
  append_postings<<<blocks_for(n), kThreads, 0, s.stream>>>(
      s.run_keys.data, s.run_counts.data, n, base, s.kept_keys[0].data + run_size_, s.kept_freqs[0].data + run_size_);
  WARP_CUDA_CHECK_LAUNCH();
  run_size_ += n;
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return true;
}

void GpuAnalyzer::sort_run(std::vector<uint32_t>& stems, std::vector<uint32_t>& begins) {
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  cudaStream_t stream = s.stream;
  const size_t n = run_size_;
  stems.clear(), begins.clear();
  run_distinct_ = 0;
  write_noted_prefixes();
  if (n > 0) {
    cub::DoubleBuffer<unsigned long long> keys(s.kept_keys[0].data, s.kept_keys[1].data);
    cub::DoubleBuffer<uint32_t> freqs(s.kept_freqs[0].data, s.kept_freqs[1].data);
    const int key_bits = 32 + static_cast<int>(std::bit_width(stem_bound_));
    size_t temp_bytes = s.run_temp.capacity;
    WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.run_temp.data, temp_bytes, keys, freqs, n, 0,
                                                    std::min(key_bits, 64), stream));
    s.sorted_keys_buffer = keys.selector, s.sorted_freqs_buffer = freqs.selector;
    const unsigned long long* sorted = keys.Current();
    mark_heads<<<blocks_for(n), kThreads, 0, stream>>>(sorted, static_cast<uint32_t>(n), s.head_flags.data);
    WARP_CUDA_CHECK_LAUNCH();
    thrust::counting_iterator<uint32_t> positions(0);
    temp_bytes = s.run_temp.capacity;
    WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(s.run_temp.data, temp_bytes, positions, s.head_flags.data, s.heads.data,
                                               s.head_count.data, n, stream));
    WARP_CUDA_CHECK(cudaMemcpyAsync(s.head_count_host, s.head_count.data, sizeof(int), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int count = *s.head_count_host;
    if (count <= 0 || static_cast<size_t>(count) > n)
      throw Error("GPU analysis: the device found no stems in a run of postings");
    run_distinct_ = static_cast<size_t>(count);
    head_stems<<<blocks_for(run_distinct_), kThreads, 0, stream>>>(sorted, s.heads.data, static_cast<uint32_t>(count),
                                                                   s.head_stems.data);
    WARP_CUDA_CHECK_LAUNCH();
    stems.resize(run_distinct_);
    begins.resize(run_distinct_ + 1);
    WARP_CUDA_CHECK(cudaMemcpyAsync(stems.data(), s.head_stems.data, run_distinct_ * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(begins.data(), s.heads.data, run_distinct_ * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    begins.back() = static_cast<uint32_t>(n);
  } else {
    begins.push_back(0);
  }
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

void GpuAnalyzer::order_run(const std::vector<uint32_t>& out_begins) {
  if (run_distinct_ == 0) return;
  if (out_begins.size() != run_distinct_) throw Error("GPU analysis: a run's order names another count of stems");
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  cudaStream_t stream = s.stream;
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.out_begins.data, out_begins.data(), run_distinct_ * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, stream));
  const size_t threads = run_distinct_ * 32;
  place_postings<<<blocks_for(threads), kThreads, 0, stream>>>(
      s.kept_keys[s.sorted_keys_buffer].data, s.kept_freqs[s.sorted_freqs_buffer].data,
      static_cast<uint32_t>(run_size_), s.heads.data, static_cast<uint32_t>(run_distinct_), s.out_begins.data,
      s.kept_keys[1 - s.sorted_keys_buffer].data);
  WARP_CUDA_CHECK_LAUNCH();
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

const uint32_t* GpuAnalyzer::fetch_run(size_t from, size_t count) {
  if (count > kRunFetch || from + count > run_size_) throw Error("GPU analysis: a fetch outside the run");
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  WARP_CUDA_CHECK(cudaMemcpyAsync(run_fetched_, s.kept_keys[1 - s.sorted_keys_buffer].data + from,
                                  count * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s.stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return run_fetched_;
}

void GpuAnalyzer::write_noted_prefixes() {
  if (noted_prefixes_.empty()) return;
  State& s = *state_;
  const uint32_t n = static_cast<uint32_t>(noted_prefixes_.size() / 2);
  s.noted.reserve(noted_prefixes_.size());
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.noted.data, noted_prefixes_.data(), noted_prefixes_.size() * sizeof(uint64_t),
                                  cudaMemcpyHostToDevice, s.stream));
  write_prefixes<<<blocks_for(n), kThreads, 0, s.stream>>>(s.noted.data, n, table_.device_prefixes());
  WARP_CUDA_CHECK_LAUNCH();
  // No wait before the vector changes: a copy from pageable memory has been staged by the time
  // cudaMemcpyAsync returns (CUDA's "API synchronization behavior"), and the kernel reads the copy.
  noted_prefixes_.clear();
}

void GpuAnalyzer::order_run_stems(std::vector<uint32_t>& by_prefix, std::vector<uint64_t>& prefixes) {
  by_prefix.clear(), prefixes.clear();
  if (run_distinct_ == 0) return;
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  cudaStream_t stream = s.stream;
  const uint32_t count = static_cast<uint32_t>(run_distinct_);
  gather_prefixes<<<blocks_for(count), kThreads, 0, stream>>>(s.head_stems.data, count, table_.device_prefixes(),
                                                              s.head_prefixes[0].data, s.head_indexes[0].data);
  WARP_CUDA_CHECK_LAUNCH();
  cub::DoubleBuffer<unsigned long long> keys(s.head_prefixes[0].data, s.head_prefixes[1].data);
  cub::DoubleBuffer<uint32_t> indexes(s.head_indexes[0].data, s.head_indexes[1].data);
  size_t temp_bytes = s.run_temp.capacity;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.run_temp.data, temp_bytes, keys, indexes, count, 0, 64, stream));
  by_prefix.resize(count);
  prefixes.resize(count);
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(prefixes.data(), keys.Current(), count * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(by_prefix.data(), indexes.Current(), count * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  // A stem without its prefix (none is 0: a term has a first byte) would be misplaced: the run is
  // then not the device's to order.
  if (prefixes.front() == 0) throw Error("GPU analysis: a stem of a run has no prefix on the device");
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

}  // namespace warp::pipeline
