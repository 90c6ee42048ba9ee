// A partition's index in GPU memory: the posting-list arena, document length norms and, for
// pfor-ding lists, their list-wide exception arrays decoded at upload (Ding et al. decode these
// small arrays before a list's blocks; doing it once at upload trades their raw size for no
// per-query work). A few large cudaMalloc allocations, owned here and freed on destruction;
// never managed memory. Lexicon and block metadata lookups stay on the host.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/index/index_view.hpp"
#include "leaf/gpu/device_list.hpp"

namespace warp::gpu {

class DeviceIndex {
 public:
  explicit DeviceIndex(const IndexView& index);  // uploads; throws Error on CUDA failure
  ~DeviceIndex();
  DeviceIndex(const DeviceIndex&) = delete;
  DeviceIndex& operator=(const DeviceIndex&) = delete;

  const IndexView& host() const { return index_; }
  // The device descriptor of `term`'s list; false when the partition does not hold the term.
  bool find(const std::string& term, DeviceList& list, const TermInfo** info = nullptr) const;
  const float* length_norms() const { return norms_; }
  size_t bytes_resident() const { return bytes_; }
  uint32_t max_list_slots() const { return max_list_slots_; }   // blocks × block size of the longest list
  uint32_t max_list_blocks() const { return max_list_blocks_; }

 private:
  struct ExceptionOffsets {
    uint64_t doc_positions, doc_high, freq_positions, freq_high;
  };
  DeviceSequence device_sequence(const EncodedView& seq, uint64_t positions, uint64_t high) const;

  const IndexView& index_;
  uint32_t* postings_ = nullptr;    // copy of index.postings
  float* norms_ = nullptr;          // copy of index.length_norms
  uint32_t* exceptions_ = nullptr;  // pfor-ding exception positions and high bits
  std::unordered_map<std::string, ExceptionOffsets> exception_offsets_;
  size_t bytes_ = 0;
  uint32_t max_list_slots_ = 0;
  uint32_t max_list_blocks_ = 0;
};

}  // namespace warp::gpu
