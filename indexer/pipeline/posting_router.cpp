#include "indexer/pipeline/posting_router.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace warp::pipeline {

PostingRouter::PostingRouter(size_t parsers, size_t max_queued)
    : parsers_(std::max<size_t>(parsers, 2)),
      by_parsers_(static_cast<uint32_t>(parsers_)),
      max_queued_(max_queued),
      outboxes_(parsers_),
      inboxes_(std::make_unique<Inbox[]>(parsers_)),
      producing_(parsers_) {
  for (Outbox& out : outboxes_) out.buffers.resize(parsers_);
}

PostingRouter::Buffer PostingRouter::spare() {
  std::lock_guard<std::mutex> lock(spares_mutex_);
  if (spares_.empty()) return {};
  Buffer buffer = std::move(spares_.back());
  spares_.pop_back();
  return buffer;
}

void PostingRouter::hand_over(size_t from, const Sink& sink, const std::atomic<bool>& stop) {
  push(from);
  take(from, sink);
  // Over the bound: the others take theirs when they next hand over (every ~13 ms at 16 threads).
  while (queued_.load(std::memory_order_relaxed) > max_queued_ && !stop.load(std::memory_order_relaxed)) {
    if (take(from, sink)) continue;
    std::unique_lock<std::mutex> lock(wait_mutex_);
    handed_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

void PostingRouter::push(size_t from) {
  Outbox& out = outboxes_[from];
  if (out.held > 0) {
    for (size_t to = 0; to < parsers_; ++to) {
      Buffer& buffer = out.buffers[to];
      if (buffer.empty()) continue;
      const size_t n = buffer.size();
      {
        std::lock_guard<std::mutex> lock(inboxes_[to].mutex);
        inboxes_[to].handed.push_back({from, std::exchange(buffer, spare())});
      }
      queued_.fetch_add(n, std::memory_order_relaxed);
      routed_.fetch_add(n, std::memory_order_relaxed);
    }
    out.held = 0;
    handed_.notify_all();
  }
}

bool PostingRouter::take(size_t to, const Sink& sink) {
  std::vector<Handed> taken;
  {
    std::lock_guard<std::mutex> lock(inboxes_[to].mutex);
    taken.swap(inboxes_[to].handed);
  }
  if (taken.empty()) return false;
  for (Handed& h : taken) {
    sink(h.from, h.buffer);
    queued_.fetch_sub(h.buffer.size(), std::memory_order_relaxed);
    h.buffer.clear();
  }
  {
    std::lock_guard<std::mutex> lock(spares_mutex_);
    for (Handed& h : taken) spares_.push_back(std::move(h.buffer));
  }
  handed_.notify_all();
  return true;
}

void PostingRouter::finish(size_t from, const Sink& sink, const std::atomic<bool>& stop) {
  push(from);
  {
    std::lock_guard<std::mutex> lock(wait_mutex_);
    --producing_;
  }
  handed_.notify_all();
  while (!stop.load(std::memory_order_relaxed)) {
    take(from, sink);
    std::unique_lock<std::mutex> lock(wait_mutex_);
    if (producing_ == 0) {
      lock.unlock();
      take(from, sink);  // whatever the last ones handed over before they finished
      return;
    }
    handed_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

}  // namespace warp::pipeline
