// Decoding many lists in one launch: a table of tasks (list, output offset, query, BM25 weight),
// each thread block finding its task by the first thread block of each (PARA batches, gpu_batch.cu).
#pragma once
#include "leaf/gpu/list_decode.cuh"

namespace warp::gpu {

// One (query, list) pair of a fused launch.
struct Task {
  DeviceList list;
  uint32_t block_begin;  // first thread block of the launch that works on this task
  uint32_t out_offset;   // first output slot of the task
  uint32_t mask_offset;  // first block-mask byte of the task
  uint32_t query;        // index in the batch
  float weight;
};

// kCandidates: docIDs, BM25 scores (-1 past the list) and the query, every slot of every block;
// kBlocks: docIDs and frequencies of the decoded blocks' postings; kAccumulate: BM25 added to the
// query's dense accumulators.
enum class TaskOutput : uint32_t { kCandidates, kBlocks, kAccumulate };

template <int BS>
__global__ void decode_tasks_kernel(const Task* tasks, uint32_t task_count, const uint8_t* masks, TaskOutput output,
                                    uint32_t* docs_out, uint32_t* freqs_out, float* scores_out, uint32_t* query_out,
                                    float* accumulators, size_t accumulator_stride, const float* norms,
                                    uint32_t doc_begin, Counters* counters) {
  __shared__ uint32_t task_index;
  __shared__ BlockDecodeStorage<BS> storage;
  if (threadIdx.x == 0) task_index = task_of_block(tasks, task_count, blockIdx.x);
  __syncthreads();
  const Task& task = tasks[task_index];
  const uint32_t block = blockIdx.x - task.block_begin;
  if (masks != nullptr && masks[task.mask_offset + block] == 0) return;  // uniform over the thread block
  const uint32_t n = min(static_cast<uint32_t>(BS), task.list.count - block * BS);
  uint32_t doc, freq;
  decode_postings<BS>(task.list, block, n, storage, doc, freq);
  const uint32_t slot = task.out_offset + block * BS + threadIdx.x;
  const bool live = threadIdx.x < n;
  if (output == TaskOutput::kCandidates) {
    docs_out[slot] = live ? doc : 0;
    scores_out[slot] = live ? bm25_units_dev(task.weight, freq, norms[doc - doc_begin]) : -1.0f;
    query_out[slot] = task.query;
  } else if (output == TaskOutput::kBlocks) {
    if (live) docs_out[slot] = doc, freqs_out[slot] = freq;
  } else if (live) {
    atomicAdd(&accumulators[task.query * accumulator_stride + doc - doc_begin], bm25_units_dev(task.weight, freq, norms[doc - doc_begin]));
  }
  if (threadIdx.x == 0) {
    atomicAdd(&counters[task.query].blocks_decoded, 1ull);
    atomicAdd(&counters[task.query].postings_decoded, static_cast<unsigned long long>(n));
  }
}

}  // namespace warp::gpu
