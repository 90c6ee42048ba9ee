// Whether a CUDA GPU is usable here, and CUDA error checking. Host-only header: callers need no
// CUDA toolkit headers to ask.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leaf/query/query_processor.hpp"

namespace warp::gpu {

// True when this build has CUDA and a device is present; otherwise false, with the reason
// ("built without CUDA", "no CUDA-capable device", "CUDA driver too old"...) in `why`.
bool gpu_available(std::string* why = nullptr);

// CUDA devices on this machine (0 without CUDA or a driver).
int gpu_device_count();

// How a host thread waits for the GPU (CUDA's scheduling flag for the device, process-wide):
// kSpin: CUDA's default on a machine with more cores than contexts, a core held busy for every
// thread waiting on a stream; kYield: spinning with sched_yield between polls; kBlock: asleep
// until the GPU signals, the core free for other threads, a wake-up's latency per wait.
enum class GpuWait { kSpin, kYield, kBlock };

// Batch streams by default: 2 for the batch queue of --processor gpu; 8 where the leaf's
// scheduler forms the batches (--processor auto): on the H200 hosts 8 streams with 4 driver
// threads sustained 1.2-2.1x what 2 streams did on the default corpus, the mixed log and the
// GOV2-like preset (tests/bench/results/gpu-queries.md). Each stream holds a batch executor's
// buffers per partition (about 0.8 GB on a 25M-document partition).
inline constexpr size_t kBatchStreams = 2, kScheduledBatchStreams = 8;
inline size_t batch_streams_for(size_t wanted, bool scheduled) {
  return wanted > 0 ? wanted : scheduled ? kScheduledBatchStreams : kBatchStreams;
}

// How a partition's GPU query processor runs.
struct GpuSettings {
  size_t lanes = 4;            // single-query path: queries in flight at once, a stream each
  size_t batch_threshold = 0;  // > 0: PARA batching, a batch closes at this many postings of effort
  size_t batch_max_queries = 16;
  uint32_t batch_wait_us = 500;   // the longest a query waits for its batch to fill
  size_t batch_streams = 0;       // batches in flight at once (one's host work overlaps another's
                                  // GPU work); 0: batch_streams_for's default
  size_t memory_budget = 0;       // bytes of posting lists on the GPU; 0 or enough: all resident,
                                  // else an LRU cache of lists by term
  std::vector<int> devices{0};    // CUDA devices; partitions spread over them (partition id mod count)
  size_t replicas = 1;            // devices per partition: > 1 puts a replica of a (hot) partition on
                                  // several, each search to the least busy
  bool scheduled = false;         // the leaf's scheduler forms the batches: batch_streams batch
                                  // executors beside the lanes (search_batch), no batch queue
  GpuWait wait = GpuWait::kSpin;  // set on every device in `devices` when a processor is made
  // warp-leaf --scheduler-cpu-as-gpu (tests and dashboards on machines without one): under
  // --processor auto, CPU processors named "gpu" take the GPU's place, so the scheduler runs.
  bool cpu_stand_in = false;
};

// A GPU query processor over `index`; throws Error naming the reason when this build or machine
// has no usable GPU.
std::unique_ptr<QueryProcessor> make_gpu_processor(const IndexView& index, const GpuSettings& settings);

// Name and memory of device 0, e.g. "NVIDIA H100 80GB HBM3, 79.1 GiB, 132 SMs".
std::string gpu_description();

}  // namespace warp::gpu
