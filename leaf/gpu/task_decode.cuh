// Decoding many lists in one launch: a table of tasks (list, output offset, query, BM25 weight),
// each warp finding its task by the first block of each (PARA batches, gpu_batch.cu).
#pragma once
#include "leaf/gpu/list_decode.cuh"

namespace warp::gpu {

// One (query, list) pair of a fused launch.
struct Task {
  DeviceList list;
  uint32_t block_begin;  // first block of the launch (numbered over the tasks) that belongs to this task
  uint32_t out_offset;   // first output slot of the task
  uint32_t mask_offset;  // first block-mask byte of the task
  uint32_t query;        // index in the batch
  float weight;
};

// kCandidates: docIDs, BM25 scores (-1 past the list) and the query, every slot of every block;
// kBlocks: docIDs and frequencies of the decoded blocks' postings; kAccumulate: BM25 added to the
// query's dense accumulators.
enum class TaskOutput : uint32_t { kCandidates, kBlocks, kAccumulate };

// A warp per compressed block of the launch (warp_decode_postings): warp w of thread block b takes
// block b * kWarpsPerThreadBlock + w of the tasks' blocks numbered one after another.
template <int BS>
__global__ void __launch_bounds__(kWarpsPerThreadBlock * 32)
    decode_tasks_kernel(const Task* tasks, uint32_t task_count, uint32_t block_total, const uint8_t* masks,
                        TaskOutput output, uint32_t* docs_out, uint32_t* freqs_out, float* scores_out, uint32_t* query_out,
                        float* accumulators, size_t accumulator_stride, const float* norms, uint32_t doc_begin,
                        Counters* counters) {
  constexpr uint32_t kPerLane = BS / 32;
  __shared__ WarpScratch<BS> scratch[kWarpsPerThreadBlock];
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  const uint32_t launch_block = blockIdx.x * kWarpsPerThreadBlock + warp;
  if (launch_block >= block_total) return;  // uniform per warp
  const Task& task = tasks[task_of_block(tasks, task_count, launch_block)];
  const uint32_t block = launch_block - task.block_begin;
  if (masks != nullptr && masks[task.mask_offset + block] == 0) return;  // uniform per warp
  uint32_t docs[kPerLane], freqs[kPerLane];
  const uint32_t n = warp_decode_postings<BS>(task.list, block, docs, freqs, scratch[warp]);
  const size_t first_slot = size_t{task.out_offset} + size_t{block} * BS;
  if (output == TaskOutput::kCandidates) {  // every slot of the block, 16 bytes at a time
    for (uint32_t g = 0; g < BS / 128; ++g) {
      float scores[4];
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t j = 4 * g + k;
        const bool live = WarpLayout<BS>::index(lane, j) < n;
        scores[k] = live ? bm25_units_dev(task.weight, freqs[j], norms[docs[j] - doc_begin]) : -1.0f;
        if (!live) docs[j] = 0;
      }
      const size_t at = first_slot + g * 128 + lane * 4;
      *reinterpret_cast<uint4*>(docs_out + at) = make_uint4(docs[4 * g], docs[4 * g + 1], docs[4 * g + 2], docs[4 * g + 3]);
      *reinterpret_cast<float4*>(scores_out + at) = make_float4(scores[0], scores[1], scores[2], scores[3]);
      *reinterpret_cast<uint4*>(query_out + at) = make_uint4(task.query, task.query, task.query, task.query);
    }
  } else {
    for (uint32_t j = 0; j < kPerLane; ++j) {
      const uint32_t index = WarpLayout<BS>::index(lane, j);
      if (index >= n) continue;
      if (output == TaskOutput::kBlocks) {
        docs_out[first_slot + index] = docs[j], freqs_out[first_slot + index] = freqs[j];
      } else {
        atomicAdd(&accumulators[task.query * accumulator_stride + docs[j] - doc_begin],
                  bm25_units_dev(task.weight, freqs[j], norms[docs[j] - doc_begin]));
      }
    }
  }
  if (lane == 0) {
    atomicAdd(&counters[task.query].blocks_decoded, 1ull);
    atomicAdd(&counters[task.query].postings_decoded, static_cast<unsigned long long>(n));
  }
}

// Launches decode_tasks_kernel over `block_total` compressed blocks of block size `block_size`.
inline void launch_decode_tasks(uint32_t block_size, const Task* tasks, uint32_t task_count, uint32_t block_total,
                                const uint8_t* masks, TaskOutput output, uint32_t* docs_out, uint32_t* freqs_out,
                                float* scores_out, uint32_t* query_out, float* accumulators, size_t accumulator_stride,
                                const float* norms, uint32_t doc_begin, Counters* counters, cudaStream_t stream) {
  if (block_total == 0) return;
  const uint32_t grid = (block_total + kWarpsPerThreadBlock - 1) / kWarpsPerThreadBlock;
  auto kernel = block_size == 256 ? decode_tasks_kernel<256> : decode_tasks_kernel<128>;
  kernel<<<grid, kWarpsPerThreadBlock * 32, 0, stream>>>(tasks, task_count, block_total, masks, output, docs_out, freqs_out,
                                                         scores_out, query_out, accumulators, accumulator_stride, norms,
                                                         doc_begin, counters);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
