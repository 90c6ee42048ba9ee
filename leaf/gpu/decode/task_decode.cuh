// Decoding many lists in one launch: a table of tasks (list, output offset, query, BM25 weight),
// each warp finding its task by the first block of each (PARA batches, gpu_batch.cu).
#pragma once
#include "leaf/gpu/decode/list_decode.cuh"

namespace warp::gpu {

// One (query, list) pair of a fused launch.
struct Task {
  DeviceList list;
  uint32_t block_begin;  // first block of the launch (numbered over the tasks) that belongs to this task
  uint32_t out_offset;   // kCandidates: the first output slot; kProbe: the query's first candidate
  uint32_t mask_offset;  // first block-mask byte of the task
  uint32_t query;        // index in the batch
  float weight;
  uint32_t first_block = 0;  // kCandidates: the list's block decoded by the task's first launch block
  uint32_t candidates = 0;   // kProbe: the query's candidates, in docID order from out_offset
};

// kCandidates: docIDs, BM25 scores (-1 past the list) and the query, every slot of every block;
// kProbe: the candidates whose docIDs fall in the block's range are looked up in the decoded block
// (in shared memory): found, the posting's BM25 is added to the candidate's score, else the
// candidate is dropped (score -1) — decoded blocks never go to global memory, so a batch needs no
// buffer of the lists' size; kAccumulate: BM25 added to the query's dense accumulators.
enum class TaskOutput : uint32_t { kCandidates, kProbe, kAccumulate };

// Decodes `block_total` compressed blocks of block size `block_size` over the tasks (a warp per
// block, each finding its task by the tasks' first blocks) into `output`'s form (task_decode.cu).
void launch_decode_tasks(uint32_t block_size, const Task* tasks, uint32_t task_count, uint32_t block_total,
                         uint8_t* masks, TaskOutput output, uint32_t* docs_out, float* scores_out, uint32_t* query_out,
                         float* accumulators, size_t accumulator_stride, const float* norms, uint32_t doc_begin,
                         Counters* counters, cudaStream_t stream);

}  // namespace warp::gpu
