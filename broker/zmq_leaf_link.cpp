#include "broker/zmq_leaf_link.hpp"

#include <unistd.h>

#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <zmq.hpp>

namespace warp {
namespace asio = boost::asio;

struct ZmqLeafLink::Socket {
  Socket(asio::io_context& io, zmq::context_t& context, const Cluster& cluster, const std::string& endpoint)
      : zmq_socket(context, zmq::socket_type::dealer), descriptor(io) {
    cluster.connect_leaf(zmq_socket, endpoint);
    descriptor.assign(::dup(zmq_socket.get(zmq::sockopt::fd)));
  }
  zmq::socket_t zmq_socket;
  asio::posix::stream_descriptor descriptor;
  bool drain_posted = false;
};

ZmqLeafLink::ZmqLeafLink(Events events, const Cluster& cluster, asio::io_context& io, zmq::context_t& context)
    : LeafLink(std::move(events)), cluster_(cluster), io_(io), context_(context) {}

ZmqLeafLink::~ZmqLeafLink() = default;

void ZmqLeafLink::follow(const std::vector<std::string>& endpoints) {
  for (auto it = sockets_.begin(); it != sockets_.end();) {
    it = std::find(endpoints.begin(), endpoints.end(), it->first) == endpoints.end() ? sockets_.erase(it)
                                                                                     : std::next(it);
  }
  for (const std::string& endpoint : endpoints) socket_for(endpoint);
}

ZmqLeafLink::Socket& ZmqLeafLink::socket_for(const std::string& endpoint) {
  auto& socket = sockets_[endpoint];
  if (!socket) {
    socket = std::make_shared<Socket>(io_, context_, cluster_, endpoint);
    watch(socket);
  }
  return *socket;
}

bool ZmqLeafLink::send(const Replica& replica, std::string_view request) {
  Socket& socket = socket_for(replica.endpoint);
  const bool sent = socket.zmq_socket.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
                    socket.zmq_socket.send(zmq::message_t(request.data(), request.size()), zmq::send_flags::dontwait);
  drain_soon(replica.endpoint);
  return sent;
}

// Handlers hold the socket weakly: one closed meanwhile is skipped.
void ZmqLeafLink::watch(const std::shared_ptr<Socket>& socket) {
  socket->descriptor.async_wait(asio::posix::stream_descriptor::wait_read,
                                [this, weak = std::weak_ptr<Socket>(socket)](boost::system::error_code ec) {
                                  auto socket = weak.lock();
                                  if (ec || !socket) return;  // the loop stops, or the socket was closed
                                  drain(*socket);
                                  watch(socket);
                                });
}

// After a send the descriptor may not signal again for replies already waiting: drain soon.
void ZmqLeafLink::drain_soon(const std::string& endpoint) {
  auto found = sockets_.find(endpoint);
  if (found == sockets_.end() || found->second->drain_posted) return;
  found->second->drain_posted = true;
  asio::post(io_, [this, weak = std::weak_ptr<Socket>(found->second)] {
    auto socket = weak.lock();
    if (!socket) return;
    socket->drain_posted = false;
    drain(*socket);
  });
}

// Every reply waiting on the socket: [empty delimiter][LeafReply].
void ZmqLeafLink::drain(Socket& socket) {
  try {
    while (socket.zmq_socket.get(zmq::sockopt::events) & ZMQ_POLLIN) {
      zmq::message_t empty, body;
      if (!socket.zmq_socket.recv(empty, zmq::recv_flags::dontwait)) break;
      if (!empty.more() || empty.size() != 0 || !socket.zmq_socket.recv(body, zmq::recv_flags::dontwait)) continue;
      if (body.more()) {  // not a reply of ours: skip the rest of the message
        zmq::message_t extra;
        while (socket.zmq_socket.recv(extra, zmq::recv_flags::dontwait) && extra.more()) {
        }
        continue;
      }
      events_.on_reply(std::string_view(static_cast<const char*>(body.data()), body.size()));
    }
  } catch (const std::exception& e) {  // never past the top of the loop
    std::fprintf(stderr, "warp-broker: fan-out: %s\n", e.what());
  }
}

}  // namespace warp
