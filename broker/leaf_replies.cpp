#include "broker/leaf_replies.hpp"

#include <vector>

#include "common/transfer/capnp_frames.hpp"

namespace warp {

void poll_leaf_replies(std::span<zmq::socket_t* const> sockets, std::chrono::milliseconds timeout,
                       const std::function<void(size_t, protocol::LeafReply::Reader)>& on_reply) {
  std::vector<zmq::pollitem_t> items;
  for (zmq::socket_t* socket : sockets) items.push_back({socket->handle(), 0, ZMQ_POLLIN, 0});
  zmq::poll(items.data(), items.size(), timeout);
  for (size_t i = 0; i < items.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    zmq::message_t body;
    if (!transfer::recv_delimited(*sockets[i], body)) continue;
    try {
      transfer::FrameReader reader(body);
      on_reply(i, reader.root<protocol::LeafReply>());
    } catch (const std::exception&) {
      // malformed: silence
    }
  }
}

}  // namespace warp
