// The command-line flags of the leaf's CPU+GPU scheduler (--processor auto), shared by warp-leaf
// and the scheduler benchmark.
#pragma once
#include <algorithm>
#include <thread>

#include "common/util/flags.hpp"
#include "leaf/sched/scheduler.hpp"

namespace warp::sched {

inline void declare_scheduler_flags(Flags& flags) {
  flags.value("scheduler-cpu-threads", "0", "--processor auto: CPU query threads of the scheduler (0: every core)")
      .value("scheduler-batch-ms", "10", "--processor auto: a GPU batch grows while its predicted time stays under this")
      .value("scheduler-prefer-ratio", "1.5", "--processor auto: how much faster a processor must be to own a query, at balanced load")
      .value("scheduler-calibration-ms", "1000", "--processor auto: start-up calibration of each processor's cost model");
}

// GPU streams and batch size come from the --gpu-batch-streams and --gpu-batch-max flags.
inline SchedulerOptions scheduler_options_from(const Flags& flags, bool gpu) {
  SchedulerOptions options;
  const size_t threads = flags.count("scheduler-cpu-threads");
  options.core.cpu_workers = threads > 0 ? threads : std::max<size_t>(1, std::thread::hardware_concurrency());
  options.core.gpu_streams = gpu ? std::max<size_t>(1, flags.count("gpu-batch-streams")) : 0;
  options.core.batch_max = std::max<size_t>(1, flags.count("gpu-batch-max"));
  options.core.batch_seconds = flags.number("scheduler-batch-ms") / 1e3;
  options.core.prefer_ratio = std::max(1.0, flags.number("scheduler-prefer-ratio"));
  options.calibration_seconds = flags.number("scheduler-calibration-ms") / 1e3;
  return options;
}

}  // namespace warp::sched
