#include "common/http/io_pool.hpp"

#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace warp::http {
namespace {
thread_local const IoPool* current_pool = nullptr;
thread_local int current_index = -1;
}  // namespace

struct IoPool::Work {
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards;
};

IoPool::IoPool(size_t threads) : work_(std::make_unique<Work>()) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < threads; ++i) {
    contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
    work_->guards.push_back(boost::asio::make_work_guard(*contexts_.back()));  // a loop without work waits
  }
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      current_pool = this;
      current_index = static_cast<int>(i);
      contexts_[i]->run();
    });
  }
}

IoPool::~IoPool() { stop(); }

int IoPool::current() const { return current_pool == this ? current_index : -1; }

void IoPool::stop() {
  for (auto& context : contexts_) context->stop();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

}  // namespace warp::http
