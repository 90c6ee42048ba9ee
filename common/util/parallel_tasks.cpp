#include "common/util/parallel_tasks.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace warp {

void run_parallel_tasks(size_t count, size_t threads, const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < std::min(std::max<size_t>(threads, 1), count); ++t) {
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < count;) {
        try {
          task(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
          next = count;
        }
      }
    });
  }
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace warp
