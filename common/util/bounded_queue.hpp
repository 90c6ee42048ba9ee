// A blocking queue of bounded capacity: push waits while it is full (back-pressure on producers),
// pop waits while it is empty and returns nothing once the queue is closed and drained.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace warp {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  void push(T item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_; });
    items_.push_back(std::move(item));
    not_empty_.notify_one();
  }

  // Without waiting: false (the item dropped) while the queue is full or closed.
  bool try_push(T item) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  std::optional<T> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // No more pushes: waiting and later pops return nothing once the queue is empty.
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }

 private:
  size_t capacity_;
  std::deque<T> items_;
  bool closed_ = false;
  std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
};

}  // namespace warp
