// The command-line flags of the GPU query processor, shared by warp-leaf and warp-search.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "common/util/flags.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_runtime.hpp"

namespace warp::gpu {

// "0,1,3" → {0, 1, 3}; throws Error on anything else.
inline std::vector<int> parse_gpu_devices(const std::string& text) {
  std::vector<int> devices;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t comma = std::min(text.find(',', from), text.size());
    const std::string item = text.substr(from, comma - from);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 4) {
      throw Error("--gpu-devices wants CUDA device numbers separated by commas, e.g. 0,1; got '" + text + "'");
    }
    devices.push_back(std::stoi(item));
    from = comma + 1;
  }
  return devices;
}

// spin | yield | block (GpuWait); throws Error on anything else.
inline GpuWait parse_gpu_wait(const std::string& text) {
  if (text == "spin") return GpuWait::kSpin;
  if (text == "yield") return GpuWait::kYield;
  if (text == "block") return GpuWait::kBlock;
  throw Error("--gpu-wait must be spin, yield or block, not '" + text + "'");
}

inline void declare_gpu_flags(Flags& flags) {
  flags.value("gpu-lanes", "4", "GPU single-query path: queries in flight at once per partition")
      .value("gpu-batch-threshold", "0", "GPU: batch queries until this many postings of work (PARA); 0: no batching")
      .value("gpu-batch-max", "16", "GPU: most queries in a batch")
      .value("gpu-batch-wait-us", "500", "GPU: longest a query waits for its batch to fill, microseconds")
      .value("gpu-batch-streams", "0",
             "GPU: batches in flight at once per partition, a stream and buffers each (0, the default: 8 where "
             "--processor auto's scheduler forms the batches, else 2)")
      .value("gpu-devices", "0",
             "GPU: CUDA devices to use, e.g. 0,1; partitions spread over them (partition id mod count)")
      .value("gpu-replicas", "1",
             "GPU: devices per partition; more than 1 replicates a partition's index on several, each search to the "
             "least busy")
      .value("gpu-memory-budget-mb", "0",
             "GPU: MiB of posting lists kept on the GPU per partition (LRU by term); 0: all")
      .value(
          "gpu-wait", "spin",
          "GPU: how a host thread waits for its stream: spin (a core busy per waiting thread), yield, or block (asleep "
          "until the GPU signals); --processor auto's GPU drivers poll their batches instead, whatever this says");
}

inline GpuSettings gpu_settings_from(const Flags& flags) {
  GpuSettings settings;
  settings.lanes = flags.count("gpu-lanes");
  settings.batch_threshold = flags.count("gpu-batch-threshold");
  settings.batch_max_queries = flags.count("gpu-batch-max");
  settings.batch_wait_us = static_cast<uint32_t>(flags.count("gpu-batch-wait-us"));
  settings.batch_streams = flags.count("gpu-batch-streams");
  settings.memory_budget = flags.count("gpu-memory-budget-mb") << 20;
  settings.devices = parse_gpu_devices(flags.get("gpu-devices"));
  settings.replicas = std::max<size_t>(1, flags.count("gpu-replicas"));
  settings.wait = parse_gpu_wait(flags.get("gpu-wait"));
  return settings;
}

}  // namespace warp::gpu
