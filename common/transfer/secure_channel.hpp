// The direct search path's framing and its Curve security (docs/adr/0001: why searches
// may leave ZeroMQ). A stream carries frames: a 4-byte little-endian length, then the body.
//
// With Curve on, the same key pairs as CurveZMQ (X25519, libsodium's crypto_box) secure it, in
// CurveZMQ's handshake (RFC 26) without its cookie (a server here keeps a connection's state anyway).
// C, S are the long-term public keys (c, s secret), C', S' fresh pairs made for the connection,
// box[X](a → B) X sealed with the secret a for the public key B, each box under a nonce of its own
// kind (below), so no box of one step opens as another's:
//   HELLO     client → server: "WSH2" C' n box[64 zero bytes](c' → S)       (to S, from a holder of c')
//   WELCOME   server → client: "WSW2" n box[S'](s → C')                     (only s makes it for C')
//   INITIATE  client → server: "WSI3" n box[C n' vouch](c' → S'),  vouch = box[C' S](c → S')
//   READY     server → client: the first sealed frame, "WSR2"
// C travels only inside the INITIATE's box (as in RFC 26: an eavesdropper does not learn which
// broker connects). The server takes C only from its allow-list, and only on a vouch: a box from c for its fresh S',
// which a recorded handshake cannot replay. The client takes the server only on a WELCOME boxed
// for its fresh C', which a thief of the client's own secret cannot make (a WELCOME boxed from s to
// C, as the first version of this handshake had it, could be made with c alone, and a HELLO's box
// sent back opened as a WELCOME). Every later frame is sealed with the key of C' and S' (forward
// secrecy: the long-term keys never encrypt data) and a nonce that counts frames in each direction,
// so a frame replayed, dropped or reordered fails to open.
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
  ~SecureSession();  // the key zeroed
  // Move-only: a copy that sealed would reuse the original's nonces. A moved-from session holds no
  // key and refuses to seal or open.
  SecureSession(const SecureSession&) = delete;
  SecureSession& operator=(const SecureSession&) = delete;
  SecureSession(SecureSession&& other) noexcept;
  SecureSession& operator=(SecureSession&& other) noexcept;
  // Throws Error on a moved-from session.
  std::string seal(std::string_view payload);
  // nullopt: forged, altered, replayed or out of order (or a moved-from session).
  std::optional<std::string> open(std::string_view body);

 private:
  void take(SecureSession& other) noexcept;
  std::array<uint8_t, 32> key_;
  uint8_t send_side_, receive_side_;
  uint64_t sent_ = 0, received_ = 0;
  bool holds_key_ = true;
};

// Handshake messages are at most this long: before its handshake is done, a server reads no longer
// frame (a stranger cannot make it hold a large one).
inline constexpr size_t kMaxHandshakeFrame = 255;
// Whether the frame starting at `at` of `buffer` announces more than kMaxHandshakeFrame bytes (its
// length's first byte read; false while fewer than 4 bytes are in): before its handshake is done,
// neither side holds more than a handshake message for a peer.
bool handshake_frame_too_long(std::string_view buffer, size_t at);

// The client's side: hello(), then welcome() on the server's WELCOME gives the INITIATE to send,
// then ready() on the server's first frame gives the session.
class ClientHandshake {
 public:
  // `own`: the client's pair, `server_public`: the server's public key (Z85 both).
  ClientHandshake(const CurveKeyPair& own, const std::string& server_public);
  ~ClientHandshake();
  ClientHandshake(const ClientHandshake&) = delete;
  ClientHandshake& operator=(const ClientHandshake&) = delete;
  const std::string& hello() const { return hello_; }
  // The INITIATE; nullopt: the WELCOME is not from the holder of the server's secret key.
  std::optional<std::string> welcome(std::string_view welcome);
  // The session; nullopt: not the READY (or before a WELCOME).
  std::optional<SecureSession> ready(std::string_view ready);
  // The WELCOME taken; the READY is next.
  bool welcomed() const { return session_.has_value(); }

 private:
  std::array<uint8_t, 32> server_public_, own_public_, own_secret_, temporary_public_, temporary_secret_;
  std::optional<SecureSession> session_;  // after the WELCOME
  std::string hello_;
};

struct ServerAccepted {
  std::string ready;      // the READY frame to send, sealed
  SecureSession session;  // past the READY
  std::string client;     // the client's public key (Z85), vouched for
};

// The server's side of one connection: hello() on the client's first frame, initiate() on its second.
class ServerHandshake {
 public:
  ServerHandshake(const CurveKeyPair& own, const std::vector<std::string>& allowed);
  ~ServerHandshake();
  ServerHandshake(const ServerHandshake&) = delete;
  ServerHandshake& operator=(const ServerHandshake&) = delete;
  // The WELCOME; nullopt: not a HELLO for this server's key (or not the first message).
  std::optional<std::string> hello(std::string_view hello);
  // nullopt: not an INITIATE of this connection, a client key off the allow-list, or a vouch that
  // does not open (or before a HELLO).
  std::optional<ServerAccepted> initiate(std::string_view initiate);
  // A HELLO answered; the INITIATE is next.
  bool welcomed() const { return welcomed_; }

 private:
  const CurveKeyPair& own_;  // both outlive the handshake
  const std::vector<std::string>& allowed_;
  bool welcomed_ = false;
  std::array<uint8_t, 32> client_temporary_{}, temporary_public_{}, temporary_secret_{};
};

}  // namespace warp::transfer
