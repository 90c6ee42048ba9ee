// The write-log tail between the indexer and its leaves (common/protocol/write.capnp: TailRequest,
// TailReply of LoggedWrites) to and from ZeroMQ frames.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

#include "common/index/logged_write.hpp"

namespace warp::transfer {

struct TailAnswer {
  std::vector<LoggedWrite> writes;
  uint64_t epoch = 0, first_kept = 0, last = 0;
  std::string error;
};

// `encoded`: the reply's writes asked for as encodedWrites (a leaf of this release always asks so).
zmq::message_t tail_request_frame(uint64_t after, uint32_t wait_ms, uint32_t max_writes, bool encoded = true);
zmq::message_t tail_reply_frame(const TailAnswer& answer);
// A write as the indexer keeps it for its tail: encoded once, copied as bytes into every reply.
std::string encode_logged_write(const LoggedWrite& write);
LoggedWrite decode_logged_write(std::string_view encoded);  // throws Error on a malformed one
// A reply (answer's writes ignored) whose writes are `encoded` (encode_logged_write), in order.
zmq::message_t tail_reply_frame(const TailAnswer& answer, const std::vector<std::string_view>& encoded);
// Either form of writes. Throws Error on a malformed frame or one whose writes are out of order
// or not after `after`.
TailAnswer read_tail_reply(const zmq::message_t& frame, uint64_t after);

}  // namespace warp::transfer
