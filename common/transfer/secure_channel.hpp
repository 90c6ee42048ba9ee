// The direct search path's framing and its Curve security (DESIGN.md, fixed points: why searches
// may leave ZeroMQ). A stream carries frames: a 4-byte little-endian length, then the body.
//
// With Curve on, the same key pairs as CurveZMQ (X25519, libsodium's crypto_box) secure it, after
// CurveZMQ's design without its cookie (a server here keeps a connection's state anyway):
//   HELLO   client → server: "WSH1" C' C n box[C'](c → S, n)
//   WELCOME server → client: "WSW1" n box[S'](s → C, n)
// C, S are the long-term public keys (c, s secret), C', S' fresh ones made for the connection. The
// server accepts C only from its allow-list, and only a holder of c can make the HELLO box, which
// binds C' to C; only the holder of s can make the WELCOME box. Every later frame is sealed with
// the key of C' and S' (forward secrecy: the long-term keys never encrypt data) and a nonce that
// counts frames in each direction, so a frame replayed, dropped or reordered fails to open.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/transfer/curve.hpp"

namespace warp::transfer {

inline constexpr uint32_t kMaxStreamFrame = 64u << 20;

// Appends [length][body] to `out`.
void append_stream_frame(std::string& out, std::string_view body);
// The frame starting at `at` of `buffer`, moving `at` past it; nullopt while it is incomplete.
// Throws Error for a length over kMaxStreamFrame (a broken or hostile peer).
std::optional<std::string_view> next_stream_frame(std::string_view buffer, size_t& at);

// A secured connection's state after the handshake: seals what this side sends, opens what the
// other side sent. Each direction's nonce is its own counter.
class SecureSession {
 public:
  SecureSession(const uint8_t* shared_key, bool client);
  std::string seal(std::string_view payload);
  // nullopt: forged, altered, replayed or out of order.
  std::optional<std::string> open(std::string_view body);

 private:
  std::array<uint8_t, 32> key_;
  uint8_t send_side_, receive_side_;
  uint64_t sent_ = 0, received_ = 0;
};

class ClientHandshake {
 public:
  // `own`: the client's pair, `server_public`: the server's public key (Z85 both).
  ClientHandshake(const CurveKeyPair& own, const std::string& server_public);
  const std::string& hello() const { return hello_; }
  // nullopt: the WELCOME is not from the holder of the server's secret key.
  std::optional<SecureSession> finish(std::string_view welcome) const;

 private:
  std::array<uint8_t, 32> server_public_, own_public_, own_secret_, temporary_public_, temporary_secret_;
  std::string hello_;
};

struct ServerAccepted {
  std::string welcome;
  SecureSession session;
};
// nullopt: not a HELLO, a client key off the allow-list (Z85 keys), or a box that does not open.
std::optional<ServerAccepted> accept_hello(std::string_view hello, const CurveKeyPair& own,
                                           const std::vector<std::string>& allowed);

}  // namespace warp::transfer
