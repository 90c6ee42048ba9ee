// Which connections the leaf's direct search path takes and keeps, so that whoever reaches the port
// cannot take the leaf's descriptors or its front end's time: at most `connections` open (sized
// from the process's descriptor limit, leaving room for ZeroMQ, HTTP and the partitions' files), at
// most `unauthenticated` of them before their Curve handshake and `unauthenticated_per_source` from
// one address, and HELLOs answered (three X25519 operations each, on the front end's thread) at
// most `handshakes_per_second` overall and `handshakes_per_source_per_second` from one address.
// A connection that has not finished its handshake within the handshake timeout is closed by the
// front end (leaf_direct_path.cpp). Thread-safe.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace warp {

class DirectAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t connections = 4096;
    size_t unauthenticated = 256;
    size_t unauthenticated_per_source = 16;
    double handshakes_per_second = 2000;
    double handshakes_per_source_per_second = 100;
  };
  enum class Refusal { kNone, kConnections, kUnauthenticated, kSource, kHandshakeRate };
  static std::string_view name(Refusal refusal);  // for the metric's reason label

  // `secure`: connections must complete a Curve handshake (else they count as authenticated at once).
  DirectAdmission(Limits limits, bool secure) : limits_(limits), secure_(secure) {}

  // A new connection from `source`: kNone (counted as open, and unauthenticated where secure) or
  // why it is refused (nothing counted).
  Refusal admit(const std::string& source);
  void authenticated(const std::string& source);  // its handshake completed
  // Closed; `was_authenticated`: whether it had completed its handshake (or the path is not secure).
  void closed(const std::string& source, bool was_authenticated);
  // A HELLO from `source` at `now`: false past the overall or the source's rate (token buckets a
  // second deep).
  bool handshake_allowed(const std::string& source, Clock::time_point now);

  size_t open() const;
  size_t unauthenticated() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last{};
  };
  static void refill(Bucket& bucket, double rate, Clock::time_point now);

  const Limits limits_;
  const bool secure_;
  mutable std::mutex mutex_;
  size_t open_ = 0, unauthenticated_ = 0;
  std::unordered_map<std::string, size_t> unauthenticated_by_source_;
  Bucket overall_;
  std::unordered_map<std::string, Bucket> by_source_;
};

// The most connections the direct search path may hold: the process's open-file limit less the
// descriptors open now and `reserve` more for what the leaf opens later (a new generation's files,
// ZeroMQ and HTTP connections); at least 16.
size_t direct_connection_budget(size_t reserve = 256);

}  // namespace warp
