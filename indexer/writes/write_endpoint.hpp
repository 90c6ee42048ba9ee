// The indexer's write socket: a ZeroMQ ROUTER taking WriteRequests (common/protocol/write.capnp)
// from brokers, appending their ops to the write log and replying once they are durable. Replies
// come back in whatever order the log commits them; a request is never held on this socket's
// thread (the log's committer answers it, through an eventfd this thread polls). With Curve, only
// broker*.pub keys may connect.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/transfer/curve.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp::writes {

class WriteEndpoint {
 public:
  // `folded`: the write sequence the latest generation holds (read for each reply).
  WriteEndpoint(const std::string& endpoint, WriteLog& log, std::function<uint64_t()> folded,
                const transfer::CurveConfig& curve = {});
  ~WriteEndpoint();
  WriteEndpoint(const WriteEndpoint&) = delete;
  WriteEndpoint& operator=(const WriteEndpoint&) = delete;
  const std::string& endpoint() const { return endpoint_; }  // as bound
  uint64_t requests() const { return requests_; }
  uint64_t refused() const { return refused_; }  // malformed requests

 private:
  void serve();
  struct State;
  std::unique_ptr<State> state_;
  WriteLog& log_;
  std::function<uint64_t()> folded_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace warp::writes
