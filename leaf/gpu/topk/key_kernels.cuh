// The key kernels in front of the top-k selection (topk_select.cuh), shared by the single-query
// path and PARA batches: (score, docID) keys of AND candidates or of dense accumulators, counted
// into the selection's buckets. Launchers only; the kernels are in key_kernels.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace warp::gpu {

// Candidates with a score > 0 are live (matched every term so far: any match scores at least one
// unit; a document deleted under an overlay scores 0 with its infinite norm); `matches` counts them.
// One thread a candidate, 256 a block.
void launch_candidate_keys(uint32_t count, const uint32_t* docs, const float* scores, uint64_t* keys, uint32_t* buckets,
                           unsigned long long* matches, cudaStream_t stream);

// Document doc_begin + i has accumulators[i]; BM25 of a matching term is > 0, so zero means no match.
void launch_accumulator_keys(uint32_t count, const float* accumulators, uint32_t doc_begin, uint64_t* keys,
                             uint32_t* buckets, cudaStream_t stream);

}  // namespace warp::gpu
