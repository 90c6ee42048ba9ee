// One broker connection of the leaf's direct search path (LeafOptions::search_listen): frames of
// common/transfer/secure_channel.hpp, sealed after a Curve handshake where the leaf has Curve on.
// The front end reads it; replies are written by the front end, the workers and the scheduler's
// threads, one whole frame at a time under the mutex.
#pragma once
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/transfer/secure_channel.hpp"

namespace warp {

struct DirectPeer {
  DirectPeer(int fd, bool secure, std::string source)
      : fd(fd), secure(secure), source(std::move(source)), accepted(std::chrono::steady_clock::now()) {}
  ~DirectPeer();
  DirectPeer(const DirectPeer&) = delete;
  DirectPeer& operator=(const DirectPeer&) = delete;

  // A reply: sealed once the session is secure. A broker that takes nothing for a second, or a
  // connection that failed, marks the peer broken and later frames are dropped (the broker's
  // deadline moves the query to another replica).
  void write_frame(std::string_view body);
  // A frame as it is (the handshake's WELCOME, and its READY, sealed by the handshake).
  void write_plain(std::string_view body);

  const int fd;
  const bool secure;         // Curve on: the first frames must be a HELLO, then an INITIATE
  const std::string source;  // the peer's address (DirectAdmission)
  const std::chrono::steady_clock::time_point accepted;
  // The handshake done (Curve off: never needed). Set by the handshake thread after `session`
  // (release); the front end reads `session` only once it sees this (acquire).
  std::atomic<bool> authenticated{false};
  std::atomic<bool> timed_out{false};                  // closed for its handshake's deadline
  std::atomic<bool> refused{false};                    // its handshake failed: being closed
  int handshake_frames = 0;                            // handed to the handshake thread (the front end's)
  std::optional<transfer::ServerHandshake> handshake;  // in progress (the handshake thread's alone)
  std::optional<transfer::SecureSession> session;      // set by the handshake thread, then the front end's
  std::string in;                                      // bytes read, not yet whole frames
  std::mutex write_mutex;
  bool broken = false;  // guarded by write_mutex

 private:
  void send_locked(const std::string& frame);
  void mark_broken();  // with write_mutex held
};

}  // namespace warp
