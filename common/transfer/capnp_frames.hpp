// Cap'n Proto messages in ZeroMQ frames. A ZeroMQ frame need not be 8-byte aligned and Cap'n
// Proto reads only aligned words, so frames are copied into an aligned buffer before reading.
#pragma once
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <zmq.hpp>

#include <cstring>
#include <optional>

#include "common/util/status.hpp"

namespace warp::transfer {

inline zmq::message_t to_frame(capnp::MessageBuilder& message) {
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  const auto bytes = words.asBytes();
  return zmq::message_t(bytes.begin(), bytes.size());
}

// Receives a reply framed as [empty delimiter][body] on a DEALER socket; false if it is not one.
inline bool recv_delimited(zmq::socket_t& socket, zmq::message_t& body) {
  zmq::message_t empty;
  return socket.recv(empty) && empty.more() && empty.size() == 0 && socket.recv(body);
}

// Owns the aligned copy the reader points into.
class FrameReader {
 public:
  explicit FrameReader(const zmq::message_t& frame) : FrameReader(frame.data(), frame.size()) {}
  FrameReader(const void* data, size_t size) {
    if (size % sizeof(capnp::word) != 0) throw Error("malformed message: size not a multiple of 8");
    words_ = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
    std::memcpy(words_.begin(), data, size);
    reader_.emplace(words_.asPtr());
  }
  template <class T>
  typename T::Reader root() {
    return reader_->getRoot<T>();
  }

 private:
  kj::Array<capnp::word> words_;
  std::optional<capnp::FlatArrayMessageReader> reader_;
};

}  // namespace warp::transfer
