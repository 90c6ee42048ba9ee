#include "leaf/gpu/decode/task_decode.cuh"

namespace warp::gpu {
namespace {

// The first of docIDs docs[begin..end) (ascending) that is at least `doc`, or end.
__device__ __forceinline__ uint32_t lower_bound_docs(const uint32_t* docs, uint32_t begin, uint32_t end, uint32_t doc) {
  while (begin < end) {
    const uint32_t middle = begin + (end - begin) / 2;
    if (docs[middle] < doc)
      begin = middle + 1;
    else
      end = middle;
  }
  return begin;
}

// kProbe for one decoded block: the block's postings go to the warp's shared arrays, then the
// lanes take the candidates in the block's docID range (after the previous block's last docID, up
// to this block's) one each and binary-search them there.
template <int BS>
__device__ void probe_block(const Task& task, uint32_t block, uint32_t n, const uint32_t (&docs)[BS / 32],
                            const uint32_t (&freqs)[BS / 32], uint32_t* shared_docs, uint32_t* shared_freqs,
                            const uint32_t* candidate_docs, float* candidate_scores, const float* norms,
                            uint32_t doc_begin) {
  const uint32_t lane = threadIdx.x & 31u;
  __syncwarp();  // the decoder's last reads of the scratch are done
#pragma unroll
  for (uint32_t j = 0; j < BS / 32; ++j) {
    const uint32_t index = WarpLayout<BS>::index(lane, j);
    if (index < n) shared_docs[index] = docs[j], shared_freqs[index] = freqs[j];
  }
  __syncwarp();
  const uint32_t first_doc = block == 0 ? 0 : task.list.block_last_docid[block - 1] + 1;
  const uint32_t last_doc = task.list.block_last_docid[block];
  const uint32_t end = task.out_offset + task.candidates;  // the range: every lane alike (broadcast loads)
  const uint32_t from = lower_bound_docs(candidate_docs, task.out_offset, end, first_doc);
  const uint32_t to = last_doc == 0xFFFFFFFFu ? end : lower_bound_docs(candidate_docs, from, end, last_doc + 1);
  for (uint32_t i = from + lane; i < to; i += 32) {
    if (candidate_scores[i] < 0) continue;
    const uint32_t doc = candidate_docs[i];
    const uint32_t low = lower_bound_docs(shared_docs, 0, n, doc);
    if (low < n && shared_docs[low] == doc) {
      candidate_scores[i] += bm25_units_dev(task.weight, shared_freqs[low], norms[doc - doc_begin]);
    } else {
      candidate_scores[i] = -1;
    }
  }
}

// A warp per compressed block of the launch (warp_decode_postings): warp w of thread block b takes
// block b * kWarpsPerThreadBlock + w of the tasks' blocks numbered one after another.
template <int BS>
__global__ void __launch_bounds__(kWarpsPerThreadBlock * 32)
    decode_tasks_kernel(const Task* tasks, uint32_t task_count, uint32_t block_total, uint8_t* masks, TaskOutput output,
                        uint32_t* docs_out, float* scores_out, uint32_t* query_out, float* accumulators,
                        size_t accumulator_stride, const float* norms, uint32_t doc_begin, Counters* counters) {
  constexpr uint32_t kPerLane = BS / 32;
  __shared__ WarpScratch<BS> scratch[kWarpsPerThreadBlock];
  __shared__ uint32_t probe_freqs[kWarpsPerThreadBlock][BS];
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
  const uint32_t launch_block = blockIdx.x * kWarpsPerThreadBlock + warp;
  if (launch_block >= block_total) return;  // uniform per warp
  const Task& task = tasks[task_of_block(tasks, task_count, launch_block)];
  const uint32_t local = launch_block - task.block_begin, block = task.first_block + local;
  if (masks != nullptr) {  // uniform per warp
    if (masks[task.mask_offset + block] == 0) return;
    __syncwarp();                                        // every lane has read it
    if (lane == 0) masks[task.mask_offset + block] = 0;  // for the next round
  }
  uint32_t docs[kPerLane], freqs[kPerLane];
  const uint32_t n = warp_decode_postings<BS>(task.list, block, docs, freqs, scratch[warp]);
  if (output == TaskOutput::kProbe) {
    probe_block<BS>(task, block, n, docs, freqs, scratch[warp].values, probe_freqs[warp], docs_out, scores_out, norms,
                    doc_begin);
  } else if (output == TaskOutput::kCandidates) {
    const size_t first_slot =
        size_t{task.out_offset} + size_t{local} * BS;  // every slot of the block, 16 bytes at a time
    for (uint32_t g = 0; g < BS / 128; ++g) {
      float scores[4];
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t j = 4 * g + k;
        const bool live = WarpLayout<BS>::index(lane, j) < n;
        scores[k] = live ? bm25_units_dev(task.weight, freqs[j], norms[docs[j] - doc_begin]) : -1.0f;
        if (!live) docs[j] = 0;
      }
      const size_t at = first_slot + g * 128 + lane * 4;
      *reinterpret_cast<uint4*>(docs_out + at) =
          make_uint4(docs[4 * g], docs[4 * g + 1], docs[4 * g + 2], docs[4 * g + 3]);
      *reinterpret_cast<float4*>(scores_out + at) = make_float4(scores[0], scores[1], scores[2], scores[3]);
      *reinterpret_cast<uint4*>(query_out + at) = make_uint4(task.query, task.query, task.query, task.query);
    }
  } else {
    for (uint32_t j = 0; j < kPerLane; ++j) {
      if (WarpLayout<BS>::index(lane, j) >= n) continue;
      atomicAdd(&accumulators[task.query * accumulator_stride + docs[j] - doc_begin],
                bm25_units_dev(task.weight, freqs[j], norms[docs[j] - doc_begin]));
    }
  }
  if (lane == 0) {
    atomicAdd(&counters[task.query].blocks_decoded, 1ull);
    atomicAdd(&counters[task.query].postings_decoded, static_cast<unsigned long long>(n));
  }
}

}  // namespace

void launch_decode_tasks(uint32_t block_size, const Task* tasks, uint32_t task_count, uint32_t block_total,
                         uint8_t* masks, TaskOutput output, uint32_t* docs_out, float* scores_out, uint32_t* query_out,
                         float* accumulators, size_t accumulator_stride, const float* norms, uint32_t doc_begin,
                         Counters* counters, cudaStream_t stream) {
  if (block_total == 0) return;
  const uint32_t grid = (block_total + kWarpsPerThreadBlock - 1) / kWarpsPerThreadBlock;
  auto kernel = block_size == 256 ? decode_tasks_kernel<256> : decode_tasks_kernel<128>;
  kernel<<<grid, kWarpsPerThreadBlock * 32, 0, stream>>>(tasks, task_count, block_total, masks, output, docs_out,
                                                         scores_out, query_out, accumulators, accumulator_stride, norms,
                                                         doc_begin, counters);
  WARP_CUDA_CHECK_LAUNCH();
}

}  // namespace warp::gpu
