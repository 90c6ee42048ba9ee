// Leaf requests over the direct search path: one TCP connection per leaf whose status names a
// search port, carrying secure_channel.hpp's frames after a Curve handshake where Curve is on.
// Ready once connected (and handshaken); until then, and after it fails, the fan-out sends that
// leaf's requests over ZeroMQ. A lost connection is made again after a pause, and the requests
// waiting on it are reported lost at once (a leaf that died: no need to wait for the attempt
// timeout). A replica named by host name has the name resolved (asynchronously, on the loop)
// before each connection, so a connection remade after a loss follows the name's address.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "broker/leaf_link.hpp"

namespace boost::asio {
class io_context;
}

namespace warp {

class DirectLeafLink final : public LeafLink {
 public:
  DirectLeafLink(Events events, const Cluster& cluster, boost::asio::io_context& io);
  ~DirectLeafLink() override;
  // Makes, or remakes for a new port, the connection on first need.
  bool ready(const Replica& replica) override;
  bool send(const Replica& replica, std::string_view request) override;
  void follow(const std::vector<std::string>& endpoints) override;

  static constexpr std::chrono::milliseconds kReconnect{200}, kResolveRetry{1000};

 private:
  struct Connection;
  using Weak = std::weak_ptr<Connection>;
  void connect(const std::shared_ptr<Connection>& link);
  void connected(const Weak& weak, int error);
  void failed(const std::shared_ptr<Connection>& link, std::chrono::milliseconds retry = kReconnect);
  void read(const std::shared_ptr<Connection>& link);
  void on_frame(const std::shared_ptr<Connection>& link, std::string_view body);
  void write(const std::shared_ptr<Connection>& link, std::string frame);
  void flush(const std::shared_ptr<Connection>& link);

  const Cluster& cluster_;
  boost::asio::io_context& io_;
  std::unordered_map<std::string, std::shared_ptr<Connection>> links_;  // by the leaf's ZeroMQ endpoint
};

}  // namespace warp
