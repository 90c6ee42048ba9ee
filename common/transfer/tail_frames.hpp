// The write-log tail between the indexer and its leaves (common/protocol/write.capnp: TailRequest,
// TailReply of LoggedWrites) to and from ZeroMQ frames.
#pragma once
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/index/logged_write.hpp"

namespace warp::transfer {

struct TailAnswer {
  std::vector<LoggedWrite> writes;
  uint64_t epoch = 0, first_kept = 0, last = 0;
  std::string error;
};

zmq::message_t tail_request_frame(uint64_t after, uint32_t wait_ms, uint32_t max_writes);
zmq::message_t tail_reply_frame(const TailAnswer& answer);
// Throws Error on a malformed frame or one whose writes are out of order or not after `after`.
TailAnswer read_tail_reply(const zmq::message_t& frame, uint64_t after);

}  // namespace warp::transfer
