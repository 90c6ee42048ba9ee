// Receiving leaf replies on the broker's DEALER sockets (fan-out and status polling).
#pragma once
#include <chrono>
#include <functional>
#include <span>
#include <zmq.hpp>

#include "common/protocol/search.capnp.h"

namespace warp {

// Polls `sockets` once for up to `timeout` and calls on_reply(index of the socket, reply) for every
// reply that arrived. A malformed reply counts as silence: it is dropped.
void poll_leaf_replies(std::span<zmq::socket_t* const> sockets, std::chrono::milliseconds timeout,
                       const std::function<void(size_t, protocol::LeafReply::Reader)>& on_reply);

}  // namespace warp
