// The command-line flags of the GPU query processor, shared by warp-leaf and warp-search.
#pragma once
#include "common/util/flags.hpp"
#include "leaf/gpu/gpu_runtime.hpp"

namespace warp::gpu {

inline void declare_gpu_flags(Flags& flags) {
  flags.value("gpu-lanes", "4", "GPU single-query path: queries in flight at once per partition")
      .value("gpu-batch-threshold", "0", "GPU: batch queries until this many postings of work (PARA); 0: no batching")
      .value("gpu-batch-max", "16", "GPU: most queries in a batch")
      .value("gpu-batch-wait-us", "500", "GPU: longest a query waits for its batch to fill, microseconds")
      .value("gpu-batch-streams", "2", "GPU: batches in flight at once per partition, a stream and buffers each")
      .value("gpu-memory-budget-mb", "0", "GPU: MiB of posting lists kept on the GPU per partition (LRU by term); 0: all");
}

inline GpuSettings gpu_settings_from(const Flags& flags) {
  GpuSettings settings;
  settings.lanes = flags.count("gpu-lanes");
  settings.batch_threshold = flags.count("gpu-batch-threshold");
  settings.batch_max_queries = flags.count("gpu-batch-max");
  settings.batch_wait_us = static_cast<uint32_t>(flags.count("gpu-batch-wait-us"));
  settings.batch_streams = flags.count("gpu-batch-streams");
  settings.memory_budget = flags.count("gpu-memory-budget-mb") << 20;
  return settings;
}

}  // namespace warp::gpu
