// Runs tasks 0..count-1 on up to `threads` threads, each taking the next task; the first exception
// stops the handing out of tasks and is rethrown once every thread has finished.
#pragma once
#include <cstddef>
#include <functional>

namespace warp {

void run_parallel_tasks(size_t count, size_t threads, const std::function<void(size_t)>& task);

}  // namespace warp
