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

}  // namespace warp::gpu
