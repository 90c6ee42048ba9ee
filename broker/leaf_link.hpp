// The broker's connections to the leaves over one transport, on one event loop: ZeroMQ DEALER
// sockets (zmq_leaf_link.hpp) or the direct search path's TCP connections (direct_leaf_link.hpp).
// The fan-out (fan_out.cpp) keeps the queries, attempts, deadlines and the merge, and hands each
// request to a link; links hand back every reply frame and say when a connection with requests
// on it is lost. Runs only on its loop.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/cluster.hpp"

namespace warp {

class LeafLink {
 public:
  struct Events {
    std::function<void(std::string_view reply)> on_reply;  // a LeafReply frame, from any leaf
    // The connection to the leaf at `endpoint` was lost: requests sent over it will not be answered.
    std::function<void(const std::string& endpoint)> on_lost;
  };
  explicit LeafLink(Events events) : events_(std::move(events)) {}
  virtual ~LeafLink() = default;
  LeafLink(const LeafLink&) = delete;
  LeafLink& operator=(const LeafLink&) = delete;

  // Whether a request to `replica` can go over this link now (a connection may be started).
  virtual bool ready(const Replica& replica) = 0;
  // Sends one LeafRequest (capnp's flat bytes); false where the connection could not take it (the
  // request is lost: the caller tries another replica).
  virtual bool send(const Replica& replica, std::string_view request) = 0;
  // Connections follow the cluster's replicas: those of `endpoints` kept or made, the others closed.
  virtual void follow(const std::vector<std::string>& endpoints) = 0;

 protected:
  Events events_;
};

}  // namespace warp
