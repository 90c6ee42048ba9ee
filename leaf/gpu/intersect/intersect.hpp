// Intersection of two sorted, distinct docID lists in GPU memory, by four methods:
// - kMergePath: Parallel Merge Find (Ding et al. 2009 §7). Splitters cut the merged order into
//   equal pieces (a binary search along each diagonal, "merge path"), so every thread merges the
//   same number of elements whatever the list lengths; matches are found while merging.
// - kBinarySearch: PARA (Ao et al. 2011 §3): one thread per docID of the shorter list, binary search
//   in the longer list.
// - kLinearRegression: PARA with the search range contracted by a linear fit of position against
//   docID and its maximum error (Ao et al. §3.2, LR).
// - kHashSegmentation: PARA with the range given by a table of segment starts over the high bits
//   of the docID (Ao et al. §3.2, HS).
// - kHsLrcCompressed: PARA on the longer list compressed with HS_LRC, each probed docID decoded
//   alone (Ao et al. Algorithm 1; lrc_format.hpp).
// LR and HS metadata and the compressed copy are made once per list when it is prepared (index
// time in Ao et al.).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace warp::gpu {

enum class IntersectMethod { kMergePath, kBinarySearch, kLinearRegression, kHashSegmentation, kHsLrcCompressed };
const char* to_string(IntersectMethod method);

// A sorted list uploaded to the GPU with its LR fit and HS segment table.
class DeviceSortedList {
 public:
  explicit DeviceSortedList(std::span<const uint32_t> docs);
  ~DeviceSortedList();
  DeviceSortedList(const DeviceSortedList&) = delete;
  DeviceSortedList& operator=(const DeviceSortedList&) = delete;

  const uint32_t* data = nullptr;
  uint32_t size = 0;
  double slope = 0, intercept = 0;  // position ≈ slope * docID + intercept
  uint32_t max_error = 0;           // |position - fit| over the list, rounded up
  uint32_t shift = 0;               // segment of a docID = docID >> shift
  uint32_t segments = 0;
  const uint32_t* segment_start = nullptr;  // segments + 1 entries
  // The list compressed with HS_LRC: sequence words, endpoints, per-block last docIDs.
  const uint32_t* lrc_words = nullptr;
  const uint32_t* lrc_endpoints = nullptr;
  const uint32_t* lrc_block_last = nullptr;
  size_t lrc_bytes = 0;
};

class GpuIntersector {
 public:
  explicit GpuIntersector(uint32_t max_shorter);  // preallocates flags, output, scan space
  ~GpuIntersector();
  GpuIntersector(const GpuIntersector&) = delete;
  GpuIntersector& operator=(const GpuIntersector&) = delete;

  // Matching docIDs, ascending (copied back).
  std::vector<uint32_t> intersect(const DeviceSortedList& shorter, const DeviceSortedList& longer,
                                  IntersectMethod method);
  // Median milliseconds of the intersection on the device (results stay there), CUDA events.
  double time_ms(const DeviceSortedList& shorter, const DeviceSortedList& longer, IntersectMethod method,
                 int repetitions);

 private:
  uint32_t run(const DeviceSortedList& shorter, const DeviceSortedList& longer, IntersectMethod method,
               bool read_count);

  uint32_t capacity_;
  uint8_t* flags_ = nullptr;
  uint32_t* output_ = nullptr;
  uint32_t* count_ = nullptr;
  void* temp_ = nullptr;
  size_t temp_bytes_ = 0;
  void* stream_ = nullptr;  // cudaStream_t
};

}  // namespace warp::gpu
