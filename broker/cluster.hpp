// The broker's view of the leaves: which replicas serve which partition, whether each is alive and
// ready (a status request every half second), their generation and analyzer, outstanding requests
// and recent latency. Replica choice: least outstanding requests, then lowest recent latency,
// among healthy replicas not yet tried for this query.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/transfer/curve.hpp"
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace warp {

struct Replica {
  uint32_t partition = 0;
  std::string endpoint;
  std::atomic<int> outstanding{0};
  std::atomic<bool> healthy{false};  // answered the last status request in time, ready
  std::atomic<uint64_t> generation{0};
  double latency_ms = 1.0;           // EWMA of search round trips; guarded by the cluster mutex
  std::string analyzer;              // guarded by the cluster mutex
};

class Cluster {
 public:
  // "0=tcp://127.0.0.1:5701,tcp://127.0.0.1:5702" per partition.
  // `curve` enabled: every socket to a leaf is a CURVE client of DIR/leaf.pub.
  explicit Cluster(const std::vector<std::string>& partition_specs, transfer::CurveConfig curve = {});
  ~Cluster();

  const std::vector<uint32_t>& partitions() const { return partitions_; }
  std::vector<std::string> endpoints() const;
  // The healthy replica of `partition` not in `tried` with the fewest outstanding requests (then the
  // lowest recent latency), below `max_outstanding`; null if none.
  Replica* choose(uint32_t partition, const std::vector<Replica*>& tried);
  // A partition with healthy replicas that are all at max_outstanding (overload), if any.
  std::optional<uint32_t> saturated_partition() const;
  void set_max_outstanding(int max_outstanding) { max_outstanding_ = max_outstanding; }
  // Makes a new socket to a leaf a CURVE client when Curve is on (before it connects).
  void secure(zmq::socket_t& socket) const;
  void record_latency(Replica& replica, double ms);
  bool ready() const;                    // every partition has a healthy replica
  uint64_t generation_signature() const; // changes whenever any replica's generation changes
  std::string analyzer() const;          // the leaves' analyzer version ("" before the first status)
  nlohmann::json describe() const;       // for /cluster

 private:
  void poll_status();
  std::vector<uint32_t> partitions_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  mutable std::mutex mutex_;
  int max_outstanding_ = 256;
  transfer::CurveConfig curve_;
  std::string leaf_key_;
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

}  // namespace warp
