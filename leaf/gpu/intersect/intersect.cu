#include "leaf/gpu/intersect/intersect.hpp"

#include <algorithm>
#include <cmath>
#include <cub/device/device_select.cuh>

#include "common/codec/codec.hpp"
#include "common/codec/lrc_format.hpp"
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/device/event_timer.cuh"

namespace warp::gpu {
namespace {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kMergeItemsPerThread = 16;

struct SearchParams {
  const uint32_t* list;
  uint32_t size;
  double slope, intercept;
  uint32_t max_error;
  uint32_t shift, segments;
  const uint32_t* segment_start;
  const uint32_t* lrc_words;
  const uint32_t* lrc_endpoints;
  const uint32_t* lrc_block_last;
};

constexpr uint32_t kLrcBlock = 128;

template <IntersectMethod kMethod>
__global__ void para_kernel(const uint32_t* shorter, uint32_t count, SearchParams longer, uint8_t* flags) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const uint32_t doc = shorter[i];
  if constexpr (kMethod == IntersectMethod::kHsLrcCompressed) {
    uint32_t position;
    flags[i] =
        lrc::find(longer.lrc_words, longer.lrc_endpoints, longer.lrc_block_last, longer.size, kLrcBlock, doc, position);
    return;
  }
  uint32_t lo = 0, hi = longer.size;
  if constexpr (kMethod == IntersectMethod::kLinearRegression) {
    const double predicted = longer.slope * doc + longer.intercept;
    const double low = floor(predicted) - longer.max_error, high = ceil(predicted) + longer.max_error + 1;
    lo = low <= 0 ? 0 : (low >= longer.size ? longer.size : static_cast<uint32_t>(low));
    hi = high <= 0 ? 0 : (high >= longer.size ? longer.size : static_cast<uint32_t>(high));
  } else if constexpr (kMethod == IntersectMethod::kHashSegmentation) {
    const uint32_t segment = doc >> longer.shift;
    if (segment >= longer.segments) {
      flags[i] = 0;
      return;
    }
    lo = longer.segment_start[segment];
    hi = longer.segment_start[segment + 1];
  }
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (longer.list[mid] < doc)
      lo = mid + 1;
    else
      hi = mid;
  }
  flags[i] = lo < longer.size && longer.list[lo] == doc;
}

// Merge path: thread t merges elements t*W .. t*W+W-1 of the merged order of a (shorter) and b.
// Ties consume a first, so when a[i] is consumed the smallest unconsumed b is the only one that can
// equal it: every match is seen exactly once, even across thread boundaries.
__global__ void merge_path_kernel(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint8_t* flags) {
  const uint64_t diagonal = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kMergeItemsPerThread;
  if (diagonal >= static_cast<uint64_t>(na) + nb) return;
  const uint32_t d = static_cast<uint32_t>(diagonal);
  uint32_t lo = d > nb ? d - nb : 0, hi = min(d, na);
  while (lo < hi) {  // the split of the first d merged elements: i from a, d - i from b
    const uint32_t mid = (lo + hi) / 2;
    if (a[mid] <= b[d - mid - 1])
      lo = mid + 1;
    else
      hi = mid;
  }
  uint32_t i = lo, j = d - lo;
  for (uint32_t step = 0; step < kMergeItemsPerThread && (i < na || j < nb); ++step) {
    if (i < na && (j >= nb || a[i] <= b[j])) {
      if (j < nb && a[i] == b[j]) flags[i] = 1;
      ++i;
    } else {
      ++j;
    }
  }
}

}  // namespace

const char* to_string(IntersectMethod method) {
  switch (method) {
    case IntersectMethod::kMergePath:
      return "merge-find";
    case IntersectMethod::kBinarySearch:
      return "para-binary";
    case IntersectMethod::kLinearRegression:
      return "para-lr";
    case IntersectMethod::kHashSegmentation:
      return "para-hs";
    case IntersectMethod::kHsLrcCompressed:
      return "para-hs-lrc";
  }
  return "?";
}

DeviceSortedList::DeviceSortedList(std::span<const uint32_t> docs) : size(static_cast<uint32_t>(docs.size())) {
  // LR: least squares of position on docID, then the largest deviation.
  if (size > 0) {
    double mean_x = 0, mean_y = (size - 1) / 2.0;
    for (uint32_t d : docs) mean_x += d;
    mean_x /= size;
    double covariance = 0, variance = 0;
    for (uint32_t i = 0; i < size; ++i) {
      const double dx = docs[i] - mean_x;
      covariance += dx * (i - mean_y);
      variance += dx * dx;
    }
    slope = variance > 0 ? covariance / variance : 0;
    intercept = mean_y - slope * mean_x;
    double worst = 0;
    for (uint32_t i = 0; i < size; ++i) worst = std::max(worst, std::fabs(i - (slope * docs[i] + intercept)));
    max_error = static_cast<uint32_t>(std::ceil(worst)) + 1;
  }
  // HS: about 8 docIDs per segment.
  const uint64_t range = size == 0 ? 1 : uint64_t{docs.back()} + 1;
  while (shift < 31 && (range >> (shift + 1)) * 8 >= size && (range >> (shift + 1)) > 0) ++shift;
  segments = static_cast<uint32_t>((range - 1) >> shift) + 1;
  std::vector<uint32_t> starts(segments + 1);
  uint32_t position = 0;
  for (uint32_t s = 0; s <= segments; ++s) {
    while (position < size && (docs[position] >> shift) < s) ++position;
    starts[s] = position;
  }
  uint32_t* device_docs = nullptr;
  uint32_t* device_starts = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&device_docs, std::max<size_t>(1, size) * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMalloc(&device_starts, starts.size() * sizeof(uint32_t)));
  if (size > 0) WARP_CUDA_CHECK(cudaMemcpy(device_docs, docs.data(), size * sizeof(uint32_t), cudaMemcpyHostToDevice));
  WARP_CUDA_CHECK(cudaMemcpy(device_starts, starts.data(), starts.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  data = device_docs;
  segment_start = device_starts;
  // HS_LRC copy: docID gaps minus one, encoded; block last docIDs beside it.
  const Codec& codec = codec_by_name("hs-lrc");
  std::vector<uint32_t> gaps(size), block_last;
  for (uint32_t i = 0; i < size; ++i) {
    gaps[i] = docs[i] - (i == 0 ? 0xFFFFFFFFu : docs[i - 1]) - 1;
    if (i % kLrcBlock == kLrcBlock - 1 || i + 1 == size) block_last.push_back(docs[i]);
  }
  EncodedSequence seq;
  codec.encode(gaps, seq);
  block_last.push_back(0);
  uint32_t *words = nullptr, *endpoints = nullptr, *last = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&words, seq.words.size() * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMalloc(&endpoints, seq.endpoints.size() * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMalloc(&last, block_last.size() * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMemcpy(words, seq.words.data(), seq.words.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  WARP_CUDA_CHECK(
      cudaMemcpy(endpoints, seq.endpoints.data(), seq.endpoints.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  WARP_CUDA_CHECK(cudaMemcpy(last, block_last.data(), block_last.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  lrc_words = words, lrc_endpoints = endpoints, lrc_block_last = last;
  lrc_bytes = (seq.words.size() + seq.endpoints.size() + block_last.size()) * sizeof(uint32_t);
}

DeviceSortedList::~DeviceSortedList() {
  cudaFree(const_cast<uint32_t*>(data));
  cudaFree(const_cast<uint32_t*>(segment_start));
  cudaFree(const_cast<uint32_t*>(lrc_words));
  cudaFree(const_cast<uint32_t*>(lrc_endpoints));
  cudaFree(const_cast<uint32_t*>(lrc_block_last));
}

GpuIntersector::GpuIntersector(uint32_t max_shorter) : capacity_(std::max(1u, max_shorter)) {
  cudaStream_t stream;
  WARP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  WARP_CUDA_CHECK(cudaMalloc(&flags_, capacity_));
  WARP_CUDA_CHECK(cudaMalloc(&output_, capacity_ * sizeof(uint32_t)));
  WARP_CUDA_CHECK(cudaMalloc(&count_, sizeof(uint32_t)));
  WARP_CUDA_CHECK(
      cub::DeviceSelect::Flagged(nullptr, temp_bytes_, output_, flags_, output_, count_, static_cast<int>(capacity_)));
  WARP_CUDA_CHECK(cudaMalloc(&temp_, std::max<size_t>(1, temp_bytes_)));
}

GpuIntersector::~GpuIntersector() {
  cudaFree(flags_), cudaFree(output_), cudaFree(count_), cudaFree(temp_);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

uint32_t GpuIntersector::run(const DeviceSortedList& a, const DeviceSortedList& b, IntersectMethod method,
                             bool read_count) {
  if (a.size > capacity_) throw Error("intersection: the shorter list exceeds the intersector's capacity");
  auto stream = static_cast<cudaStream_t>(stream_);
  if (a.size == 0 || b.size == 0) return 0;
  const SearchParams params{b.data,     b.size,          b.slope,     b.intercept,     b.max_error,     b.shift,
                            b.segments, b.segment_start, b.lrc_words, b.lrc_endpoints, b.lrc_block_last};
  const uint32_t grid = (a.size + kThreads - 1) / kThreads;
  switch (method) {
    case IntersectMethod::kMergePath: {
      WARP_CUDA_CHECK(cudaMemsetAsync(flags_, 0, a.size, stream));
      const uint64_t threads = (uint64_t{a.size} + b.size + kMergeItemsPerThread - 1) / kMergeItemsPerThread;
      merge_path_kernel<<<static_cast<uint32_t>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          a.data, a.size, b.data, b.size, flags_);
      break;
    }
    case IntersectMethod::kBinarySearch:
      para_kernel<IntersectMethod::kBinarySearch><<<grid, kThreads, 0, stream>>>(a.data, a.size, params, flags_);
      break;
    case IntersectMethod::kLinearRegression:
      para_kernel<IntersectMethod::kLinearRegression><<<grid, kThreads, 0, stream>>>(a.data, a.size, params, flags_);
      break;
    case IntersectMethod::kHashSegmentation:
      para_kernel<IntersectMethod::kHashSegmentation><<<grid, kThreads, 0, stream>>>(a.data, a.size, params, flags_);
      break;
    case IntersectMethod::kHsLrcCompressed:
      para_kernel<IntersectMethod::kHsLrcCompressed><<<grid, kThreads, 0, stream>>>(a.data, a.size, params, flags_);
      break;
  }
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_, temp_bytes_, a.data, flags_, output_, count_,
                                             static_cast<int>(a.size), stream));
  if (!read_count) return 0;
  uint32_t count = 0;
  WARP_CUDA_CHECK(cudaMemcpyAsync(&count, count_, sizeof count, cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return count;
}

std::vector<uint32_t> GpuIntersector::intersect(const DeviceSortedList& a, const DeviceSortedList& b,
                                                IntersectMethod method) {
  const uint32_t count = run(a, b, method, true);
  std::vector<uint32_t> result(count);
  if (count > 0) WARP_CUDA_CHECK(cudaMemcpy(result.data(), output_, count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  return result;
}

double GpuIntersector::time_ms(const DeviceSortedList& a, const DeviceSortedList& b, IntersectMethod method,
                               int repetitions) {
  run(a, b, method, true);  // sizes the work once, with the count read back
  return median_event_ms([&] { run(a, b, method, false); }, repetitions, static_cast<cudaStream_t>(stream_));
}

}  // namespace warp::gpu
