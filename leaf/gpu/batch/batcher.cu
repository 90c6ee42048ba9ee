// The batcher of the single-query API: queries queued until a batch's work reaches the threshold,
// it holds the most queries, or the first waited long enough; dispatchers run batches on executors.
#include "leaf/gpu/batch/gpu_batch.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "common/util/status.hpp"

namespace warp::gpu {

struct Batcher::State {
  struct Pending {
    const PreparedQuery* query;
    size_t cost;
    std::promise<QueryResult> promise;
  };
  State(const DeviceIndex& device, const BatchOptions& options) : options(options) {
    for (size_t i = 0; i < std::max<size_t>(1, options.executors); ++i) {
      executors.push_back(std::make_unique<BatchExecutor>(device, options));
    }
  }
  BatchOptions options;
  std::vector<std::unique_ptr<BatchExecutor>> executors;
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<Pending> queue;
  bool stopping = false;
  std::vector<std::thread> dispatchers;

  void dispatch_loop(BatchExecutor& executor) {
    using Clock = std::chrono::steady_clock;
    cudaSetDevice(options.device);  // the executor's; it was made on this device
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      arrived.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping with nothing left
      // Collect until the batch holds enough work, enough queries, or the first waited long enough.
      const auto deadline = Clock::now() + std::chrono::microseconds(options.max_wait_us);
      auto enough = [&] {
        size_t effort = 0, count = 0;
        for (const Pending& p : queue) {
          effort += p.cost;
          if (++count >= options.max_queries || effort >= options.threshold) return true;
        }
        return false;
      };
      while (!stopping && !enough() && arrived.wait_until(lock, deadline) != std::cv_status::timeout) {
      }
      if (queue.empty()) continue;  // another dispatcher took them
      std::vector<Pending> batch;
      size_t effort = 0;
      while (!queue.empty() && batch.size() < options.max_queries && effort < options.threshold) {
        effort += queue.front().cost;
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      lock.unlock();
      std::vector<PreparedQuery> queries;
      for (const Pending& p : batch) queries.push_back(*p.query);
      try {
        std::vector<QueryResult> results = executor.run(queries);
        for (size_t i = 0; i < batch.size(); ++i) batch[i].promise.set_value(std::move(results[i]));
      } catch (...) {
        for (Pending& p : batch) p.promise.set_exception(std::current_exception());
      }
      lock.lock();
    }
  }
};

Batcher::Batcher(const DeviceIndex& device, const BatchOptions& options)
    : state_(std::make_unique<State>(device, options)) {
  for (auto& executor : state_->executors) {
    state_->dispatchers.emplace_back([s = state_.get(), e = executor.get()] { s->dispatch_loop(*e); });
  }
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->arrived.notify_all();
  for (std::thread& dispatcher : state_->dispatchers) dispatcher.join();
}

QueryResult Batcher::search(const PreparedQuery& query) {
  std::future<QueryResult> result;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    State::Pending pending{&query, state_->executors[0]->cost(query), {}};
    result = pending.promise.get_future();
    state_->queue.push_back(std::move(pending));
  }
  state_->arrived.notify_all();
  return result.get();
}

}  // namespace warp::gpu
