// The command-line flags of the leaf's CPU+GPU scheduler (--processor auto), shared by warp-leaf
// and the scheduler benchmark.
#pragma once
#include <algorithm>
#include <thread>

#include "common/util/flags.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/sched/scheduler.hpp"

namespace warp::sched {

// CPU query threads beside `gpu_drivers` GPU driver threads: every core but one for the leaf's
// front end and one per driver (a driver polls its batches while any is in flight: a busy core).
// With a CPU thread on every core as well as busy GPU threads, batches were launched late and the
// scheduler fell below the GPU alone (H100, mixed load: 14k q/s with 16 CPU threads, 39k with 13;
// tests/bench/results/scheduler.md).
inline size_t default_cpu_workers(size_t gpu_drivers,
                                  size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency())) {
  const size_t reserved = gpu_drivers == 0 ? 0 : gpu_drivers + 1;
  return cores > reserved ? cores - reserved : 1;
}

inline void declare_scheduler_flags(Flags& flags) {
  flags
      .value("scheduler-cpu-threads", "0",
             "--processor auto: CPU query threads of the scheduler (0: every core but one for the front end and one "
             "per GPU driver thread)")
      .value("scheduler-gpu-threads", "0",
             "--processor auto: host threads driving the GPU's batch streams, each keeping its share of the streams' "
             "batches in flight (0, the default: one per stream, at most 4; fewer leave cores to the CPU's threads "
             "where batches are long, e.g. 1 for GOV2-like lists)")
      .value("scheduler-batch-ms", "10",
             "--processor auto: a GPU batch grows while its predicted time stays under this")
      .value("scheduler-cpu-run-max", "8",
             "--processor auto: queries a CPU thread takes at once at most (its share of those waiting among the free "
             "CPU threads; 1: one at a time)")
      .value("scheduler-prefer-ratio", "1.5",
             "--processor auto: how much faster a processor must be to own a query, at balanced load")
      .value("scheduler-dominance", "4",
             "--processor auto: a query this many times cheaper on one processor, in shares of each processor's "
             "capacity, joins its queue whatever the backlogs, and the other processor steals it only with workers its "
             "own work leaves free (0: off)")
      .value("scheduler-calibration-ms", "1000",
             "--processor auto: start-up calibration of each processor's cost model");
}

// GPU streams and batch size come from the --gpu-batch-streams, --gpu-devices and --gpu-batch-max flags.
inline SchedulerOptions scheduler_options_from(const Flags& flags, bool gpu) {
  SchedulerOptions options;
  const size_t threads = flags.count("scheduler-cpu-threads");
  // A stream thread per batch stream of every device: partitions (or their replicas) on several
  // GPUs run their batches at once.
  const size_t devices = gpu ? gpu::parse_gpu_devices(flags.get("gpu-devices")).size() : 0;
  options.core.gpu_streams =
      gpu ? gpu::batch_streams_for(flags.count("gpu-batch-streams"), /*scheduled=*/true) * devices : 0;
  options.gpu_threads = gpu_driver_threads(options.core.gpu_streams, flags.count("scheduler-gpu-threads"));
  options.core.cpu_workers = threads > 0 ? threads : default_cpu_workers(options.gpu_threads);
  options.core.batch_max = std::max<size_t>(1, flags.count("gpu-batch-max"));
  options.core.batch_seconds = flags.number("scheduler-batch-ms") / 1e3;
  options.core.prefer_ratio = std::max(1.0, flags.number("scheduler-prefer-ratio"));
  options.core.dominance = flags.number("scheduler-dominance");
  if (options.core.dominance != 0 && !(options.core.dominance >= 1)) {
    throw Error("--scheduler-dominance must be 0 (off) or at least 1, not " + flags.get("scheduler-dominance"));
  }
  options.core.cpu_run_max = std::max<size_t>(1, flags.count("scheduler-cpu-run-max"));
  options.calibration_seconds = flags.number("scheduler-calibration-ms") / 1e3;
  return options;
}

}  // namespace warp::sched
