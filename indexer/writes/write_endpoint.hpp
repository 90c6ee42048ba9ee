// The indexer's write socket: a ZeroMQ ROUTER taking WriteRequests (common/protocol/write.capnp)
// from brokers, appending their ops to the write log and replying once they are durable. Replies
// come back in whatever order the log commits them; a request is never held on this socket's
// thread (the log's committer answers it, through an eventfd this thread polls). With Curve, only
// broker*.pub keys may connect. Each reply says what every write did (created, replaced, deleted,
// not found); a request arriving while the tailing leaves lag too far behind the log is refused
// with `behind` and nothing logged (the broker answers 429).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/transfer/curve.hpp"
#include "indexer/writes/live_ids.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp::writes {

struct WriteEndpointOptions {
  std::function<uint64_t()> folded;  // the write sequence the latest generation holds (read for each reply)
  LiveIds* ids = nullptr;            // what each write did (created, replaced, ...); null: not said
  // Backpressure: the last sequence every tailing leaf has applied (UINT64_MAX: none tails), and how
  // far the log may run ahead of it before requests are refused with `behind` (0: never).
  std::function<uint64_t()> applied_by_leaves;
  uint64_t max_apply_lag = 0;
  transfer::CurveConfig curve{};
};

class WriteEndpoint {
 public:
  WriteEndpoint(const std::string& endpoint, WriteLog& log, WriteEndpointOptions options);
  ~WriteEndpoint();
  WriteEndpoint(const WriteEndpoint&) = delete;
  WriteEndpoint& operator=(const WriteEndpoint&) = delete;
  const std::string& endpoint() const { return endpoint_; }  // as bound
  uint64_t requests() const { return requests_; }
  uint64_t refused() const { return refused_; }      // malformed requests
  uint64_t held_back() const { return held_back_; }  // requests refused for the leaves' lag

 private:
  void serve();
  struct State;
  std::unique_ptr<State> state_;
  WriteLog& log_;
  WriteEndpointOptions options_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0}, refused_{0}, held_back_{0};
  std::thread thread_;
};

}  // namespace warp::writes
