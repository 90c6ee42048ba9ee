// Leaf requests over ZeroMQ: one DEALER socket per replica, watched on the loop through a duplicate
// of its ZMQ_FD. That descriptor is edge-triggered: after a wake-up, and after every send,
// messages are drained while ZMQ_EVENTS says some are waiting.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "broker/leaf_link.hpp"

namespace boost::asio {
class io_context;
}
namespace zmq {
class context_t;
}

namespace warp {

class ZmqLeafLink final : public LeafLink {
 public:
  ZmqLeafLink(Events events, const Cluster& cluster, boost::asio::io_context& io, zmq::context_t& context);
  ~ZmqLeafLink() override;
  bool ready(const Replica&) override { return true; }  // a dead leaf fails the send at once
  bool send(const Replica& replica, std::string_view request) override;
  void follow(const std::vector<std::string>& endpoints) override;

 private:
  struct Socket;
  Socket& socket_for(const std::string& endpoint);
  void watch(const std::shared_ptr<Socket>& socket);
  void drain_soon(const std::string& endpoint);
  void drain(Socket& socket);

  const Cluster& cluster_;
  boost::asio::io_context& io_;
  zmq::context_t& context_;
  std::unordered_map<std::string, std::shared_ptr<Socket>> sockets_;  // by endpoint
};

}  // namespace warp
