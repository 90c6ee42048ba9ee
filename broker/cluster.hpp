// The broker's view of the leaves: which replicas serve which partition, whether each is alive and
// ready (a status request every half second), their generation and analyzer, outstanding requests
// and recent latency. Replica choice: least outstanding requests, then lowest recent latency,
// among healthy replicas not yet tried for this query.
//
// A partition's replicas are fixed endpoints, or DNS names ("dns:NAME:PORT") resolved again every
// few seconds (a Kubernetes headless Service answers with every ready pod): replicas that appear
// are added, those that disappear retired, without a restart; queries in flight keep the replica
// they hold. A name that resolves to nothing leaves its partition without replicas (unavailable);
// a lookup that fails (timeout, server failure) keeps the last answer.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/index/doc_columns.hpp"
#include "common/transfer/curve.hpp"

namespace warp {

struct Replica {
  uint32_t partition = 0;
  std::string endpoint;
  std::string source;  // "" for a fixed endpoint, else the DNS name it came from
  std::atomic<int> outstanding{0};
  std::atomic<bool> healthy{false};  // answered the last status request in time, ready
  std::atomic<uint64_t> generation{0};
  std::atomic<uint64_t> staged_generation{0};  // loaded beside it, served once a broker reads it (0: none)
  std::atomic<uint64_t> write_sequence{0};     // the writes through the API its generation holds
  std::atomic<uint16_t> search_port{0};        // its direct search path's port, from its status (0: none)
  double latency_ms = 1.0;                     // EWMA of search round trips; guarded by the cluster mutex
  std::string analyzer;                        // guarded by the cluster mutex
  ColumnSchema columns;                        // its index's keyword and numeric fields; guarded by the cluster mutex
  bool positions = false;                      // its partitions keep word positions; the same
};

struct DiscoveryOptions {
  std::string dns_server;                   // "IP:PORT"; empty: the system's resolvers
  std::chrono::milliseconds refresh{2000};  // how often every name is resolved again
};

class Cluster {
 public:
  // Per partition "0=tcp://127.0.0.1:5701,tcp://127.0.0.1:5702" or "0=dns:leaf-p0.svc:5701" (mixable).
  // `curve` enabled: every socket to a leaf is a CURVE client of DIR/leaf.pub.
  explicit Cluster(const std::vector<std::string>& partition_specs, transfer::CurveConfig curve = {},
                   DiscoveryOptions discovery = {});
  ~Cluster();

  const std::vector<uint32_t>& partitions() const { return partitions_; }
  std::vector<std::string> endpoints() const;  // of the current replicas
  // Changes whenever a replica is added or retired (the fan-out connects and closes its sockets).
  uint64_t membership_version() const { return membership_version_; }
  // Called (from the discovery thread) after replicas were added or retired; empty to stop.
  void on_membership_change(std::function<void()> callback);
  // The healthy replica of `partition` not in `tried` with the fewest outstanding requests (then the
  // lowest recent latency), below `max_outstanding`; null if none. A retired replica stays alive
  // while a query holds it.
  // With `generation`, replicas holding it (served or staged) come first.
  std::shared_ptr<Replica> choose(uint32_t partition, const std::vector<const Replica*>& tried,
                                  uint64_t generation = 0);
  bool has_other(uint32_t partition, const std::vector<const Replica*>& tried);
  // The generation searches read: the newest that every partition has a healthy replica serving or
  // holding staged, as the last status round saw them (0: none in common, each reads its own). A
  // search naming it makes a leaf holding it staged serve it, so the leaves of every partition
  // swap together as this broker sees them; the status requests name it too.
  uint64_t read_generation() const { return read_generation_; }
  // A partition with healthy replicas that are all at max_outstanding (overload), if any.
  std::optional<uint32_t> saturated_partition() const;
  void set_max_outstanding(int max_outstanding) { max_outstanding_ = max_outstanding; }
  // Connects a new DEALER socket to a leaf: queued only to a live connection, ZMTP heartbeats (a
  // connection that hears nothing for 2 s is dropped and made anew, so a link back after an outage
  // is not stuck behind TCP's retransmission back-off), a CURVE client when Curve is on.
  void connect_leaf(zmq::socket_t& socket, const std::string& endpoint) const;
  // Curve between broker and leaves (off: not enabled), and the leaves' public key: the direct
  // search path's handshake uses the same keys as the sockets.
  const transfer::CurveConfig& curve() const { return curve_; }
  const std::string& leaf_key() const { return leaf_key_; }
  void record_latency(Replica& replica, double ms);
  bool ready() const;  // every partition has a healthy replica
  // Whether every healthy replica of every partition serves a generation holding the writes up to
  // `sequence` (and every partition has one); else `behind` says which partition is not there yet.
  bool serves_writes(uint64_t sequence, std::string* behind = nullptr) const;
  uint64_t generation_signature() const;  // changes whenever any replica's generation changes
  std::string analyzer() const;           // the leaves' analyzer version ("" before the first status)
  ColumnSchema columns() const;           // the index's keyword and numeric fields (filters, facets)
  bool keeps_positions() const;           // every replica that answered keeps word positions (phrases); none yet: true
  nlohmann::json describe() const;        // for /cluster
  uint64_t dns_failures() const { return dns_failures_; }

 private:
  struct NameSource {
    uint32_t partition;
    std::string name, port;
  };
  std::vector<std::shared_ptr<Replica>> snapshot() const;
  void poll_status();
  uint64_t common_generation() const;  // read_generation() from the replicas' statuses
  void discover();
  // Makes the replicas that came from `source` exactly `endpoints`.
  void set_replicas(const NameSource& source, const std::vector<std::string>& endpoints);

  std::vector<uint32_t> partitions_;
  std::vector<std::shared_ptr<Replica>> replicas_;  // guarded by mutex_
  std::vector<NameSource> names_;
  DiscoveryOptions discovery_;
  mutable std::mutex mutex_;
  std::atomic<uint64_t> membership_version_{0};
  std::mutex callback_mutex_;
  std::function<void()> membership_callback_;
  std::atomic<uint64_t> dns_failures_{0};
  std::atomic<uint64_t> read_generation_{0};
  int max_outstanding_ = 256;
  transfer::CurveConfig curve_;
  std::string leaf_key_;
  std::atomic<bool> stop_{false};
  std::thread poller_, discoverer_;
};

}  // namespace warp
