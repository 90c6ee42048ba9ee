// A constrained query's norms on the device (leaf/query/query_constraints.hpp): the norms it would
// score with (`base`, on the device: the partition's or an overlay's), infinite where its
// constraints keep a document out, so that such a document scores 0 on every path, as a deleted
// one does. Made from the constraint's docIDs alone, in time and transfer of their number: a copy
// of `base` on the device then infinity scattered to the documents kept out, or infinity filled
// then `base` scattered to the documents allowed; or, for a filter's bits, the bits moved (a bit a
// document) and each norm chosen by its bit. Stream-ordered memory, freed in order after the
// query's kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "leaf/query/query_constraints.hpp"

namespace warp::gpu {

class ConstrainedNorms {
 public:
  ConstrainedNorms(const ConstraintDocs& docs, const float* base, size_t count, uint32_t doc_begin,
                   cudaStream_t stream);
  ~ConstrainedNorms();
  ConstrainedNorms(const ConstrainedNorms&) = delete;
  ConstrainedNorms& operator=(const ConstrainedNorms&) = delete;
  const float* get() const { return norms_; }

 private:
  void fill(const ConstraintDocs& docs, const float* base, size_t count, uint32_t doc_begin);
  float* norms_ = nullptr;
  void* upload_ = nullptr;  // the docIDs or the bits moved to the device
  cudaStream_t stream_;
};

// A filter's norms kept on the device between queries: a query whose only constraint is a filter
// has norms that depend on the filter and the norms it starts from (the partition's or an
// overlay's), not on its words, so the next query with that filter takes them as they are instead
// of moving the filter's bits and writing every norm again (about 3 ms a query on a partition of
// 25 million documents). The `capacity` most recently used are kept, each a float a document.
class FilterNormsCache {
 public:
  FilterNormsCache(size_t capacity, int device) : capacity_(capacity), device_(device) {}
  // The norms kept under `key`, else made on `stream` from `make()` over `base` (`count` norms of
  // documents from `doc_begin`) and kept. The caller's device must be the cache's.
  std::shared_ptr<const float> get(const std::string& key, const std::function<ConstraintDocs()>& make,
                                   const float* base, size_t count, uint32_t doc_begin, cudaStream_t stream);

 private:
  size_t capacity_;
  int device_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const float>>> entries_;  // most recently used first
};

}  // namespace warp::gpu
