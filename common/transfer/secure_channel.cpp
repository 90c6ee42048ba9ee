#include "common/transfer/secure_channel.hpp"

#include <sodium.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/util/status.hpp"

namespace warp::transfer {
namespace {

using Key = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, crypto_box_NONCEBYTES>;

constexpr std::string_view kHello = "WSH2", kWelcome = "WSW2", kInitiate = "WSI3", kReady = "WSR2";
constexpr size_t kHelloPadding = 64;                                             // zeros, as CurveZMQ's
constexpr size_t kHelloSize = 4 + 32 + 8 + crypto_box_MACBYTES + kHelloPadding;  // 124
constexpr size_t kWelcomeSize = 4 + 16 + crypto_box_MACBYTES + 32;               // 68
constexpr size_t kVouchSize = crypto_box_MACBYTES + 64;                          // box[C' S]
constexpr size_t kInitiateBoxed = 32 + 16 + kVouchSize;                          // C, the vouch's nonce, the vouch
constexpr size_t kInitiateSize = 4 + 8 + crypto_box_MACBYTES + kInitiateBoxed;   // 156
static_assert(kHelloSize <= kMaxHandshakeFrame && kInitiateSize <= kMaxHandshakeFrame);

// Each box under a nonce of its kind: a prefix naming the step, then random bytes. Session frames'
// nonces start with 'C' or 'S' (frame_nonce), never 'W'.
Nonce step_nonce(std::string_view prefix, const uint8_t* random, size_t random_bytes) {
  Nonce nonce{};
  std::memcpy(nonce.data(), prefix.data(), prefix.size());
  std::memcpy(nonce.data() + prefix.size(), random, random_bytes);
  return nonce;
}
constexpr std::string_view kHelloNonce = "WSH2-hello------", kWelcomeNonce = "WSW2-wel",
                           kInitiateNonce = "WSI2-initiate---", kVouchNonce = "WSV2-vch";
static_assert(kHelloNonce.size() + 8 == crypto_box_NONCEBYTES && kWelcomeNonce.size() + 16 == crypto_box_NONCEBYTES &&
              kInitiateNonce.size() + 8 == crypto_box_NONCEBYTES && kVouchNonce.size() + 16 == crypto_box_NONCEBYTES);

void init_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw Error("libsodium could not be initialized");
}

Key decode(const std::string& z85) {
  Key key{};
  if (z85.size() != 40 || zmq_z85_decode(key.data(), z85.c_str()) == nullptr) throw Error("not a Z85 Curve key");
  return key;
}

std::string encode(const uint8_t* key) {
  char z85[41];
  zmq_z85_encode(z85, key, 32);
  return std::string(z85, 40);
}

const uint8_t* bytes(std::string_view text) { return reinterpret_cast<const uint8_t*>(text.data()); }
void append(std::string& out, const uint8_t* data, size_t size) {
  out.append(reinterpret_cast<const char*>(data), size);
}

// The session key of the two fresh pairs.
std::optional<SecureSession> session_of(const uint8_t* their_public, const uint8_t* own_secret, bool client) {
  uint8_t shared[crypto_box_BEFORENMBYTES];
  if (crypto_box_beforenm(shared, their_public, own_secret) != 0) return std::nullopt;
  SecureSession session(shared, client);
  sodium_memzero(shared, sizeof shared);
  return session;
}

}  // namespace

void append_stream_frame(std::string& out, std::string_view body) {
  const uint32_t size = static_cast<uint32_t>(body.size());
  const uint8_t length[4] = {static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8),
                             static_cast<uint8_t>(size >> 16), static_cast<uint8_t>(size >> 24)};
  out.append(reinterpret_cast<const char*>(length), 4);
  out.append(body);
}

std::optional<std::string_view> next_stream_frame(std::string_view buffer, size_t& at) {
  if (buffer.size() - at < 4) return std::nullopt;
  const uint8_t* length = bytes(buffer.substr(at, 4));
  const uint32_t size = length[0] | uint32_t{length[1]} << 8 | uint32_t{length[2]} << 16 | uint32_t{length[3]} << 24;
  if (size > kMaxStreamFrame)
    throw Error("a stream frame of " + std::to_string(size) + " bytes (at most " + std::to_string(kMaxStreamFrame) +
                ")");
  if (buffer.size() - at - 4 < size) return std::nullopt;
  const std::string_view body = buffer.substr(at + 4, size);
  at += 4 + size;
  return body;
}

SecureSession::SecureSession(const uint8_t* shared_key, bool client)
    : send_side_(client ? 'C' : 'S'), receive_side_(client ? 'S' : 'C') {
  std::memcpy(key_.data(), shared_key, key_.size());
}

SecureSession::~SecureSession() { sodium_memzero(key_.data(), key_.size()); }

void SecureSession::take(SecureSession& other) noexcept {
  key_ = other.key_;
  send_side_ = other.send_side_, receive_side_ = other.receive_side_;
  sent_ = other.sent_, received_ = other.received_;
  holds_key_ = other.holds_key_;
  sodium_memzero(other.key_.data(), other.key_.size());
  other.holds_key_ = false;
}

SecureSession::SecureSession(SecureSession&& other) noexcept { take(other); }

SecureSession& SecureSession::operator=(SecureSession&& other) noexcept {
  if (this != &other) take(other);
  return *this;
}

namespace {
// A frame's nonce: the sending side's letter and its frame count; never sent, both sides count.
std::array<uint8_t, crypto_box_NONCEBYTES> frame_nonce(uint8_t side, uint64_t count) {
  std::array<uint8_t, crypto_box_NONCEBYTES> nonce{};
  nonce[0] = side;
  for (int i = 0; i < 8; ++i) nonce[16 + i] = static_cast<uint8_t>(count >> (8 * i));
  return nonce;
}
}  // namespace

std::string SecureSession::seal(std::string_view payload) {
  if (!holds_key_) throw Error("a frame sealed with a moved-from secure session");
  std::string body(crypto_box_MACBYTES + payload.size(), '\0');
  const auto nonce = frame_nonce(send_side_, sent_++);
  if (crypto_box_easy_afternm(reinterpret_cast<uint8_t*>(body.data()), bytes(payload), payload.size(), nonce.data(),
                              key_.data()) != 0) {
    throw Error("a frame could not be sealed");
  }
  return body;
}

std::optional<std::string> SecureSession::open(std::string_view body) {
  if (!holds_key_ || body.size() < crypto_box_MACBYTES) return std::nullopt;
  std::string payload(body.size() - crypto_box_MACBYTES, '\0');
  const auto nonce = frame_nonce(receive_side_, received_);
  if (crypto_box_open_easy_afternm(reinterpret_cast<uint8_t*>(payload.data()), bytes(body), body.size(), nonce.data(),
                                   key_.data()) != 0) {
    return std::nullopt;
  }
  ++received_;
  return payload;
}

ClientHandshake::ClientHandshake(const CurveKeyPair& own, const std::string& server_public)
    : server_public_(decode(server_public)), own_public_(decode(own.public_key)), own_secret_(decode(own.secret_key)) {
  init_sodium();
  crypto_box_keypair(temporary_public_.data(), temporary_secret_.data());
  uint8_t random[8];
  randombytes_buf(random, sizeof random);
  const Nonce nonce = step_nonce(kHelloNonce, random, sizeof random);
  const uint8_t zeros[kHelloPadding] = {};
  uint8_t boxed[crypto_box_MACBYTES + kHelloPadding];
  if (crypto_box_easy(boxed, zeros, sizeof zeros, nonce.data(), server_public_.data(), temporary_secret_.data()) != 0) {
    throw Error("the leaf's Curve public key is not usable");
  }
  hello_.append(kHello);
  append(hello_, temporary_public_.data(), 32);
  append(hello_, random, sizeof random);
  append(hello_, boxed, sizeof boxed);
}

ClientHandshake::~ClientHandshake() {
  sodium_memzero(own_secret_.data(), own_secret_.size());
  sodium_memzero(temporary_secret_.data(), temporary_secret_.size());
}

std::optional<std::string> ClientHandshake::welcome(std::string_view welcome) {
  if (session_ || welcome.size() != kWelcomeSize || welcome.substr(0, 4) != kWelcome) return std::nullopt;
  const uint8_t* random = bytes(welcome.substr(4));
  const Nonce nonce = step_nonce(kWelcomeNonce, random, 16);
  Key server_temporary;
  if (crypto_box_open_easy(server_temporary.data(), random + 16, crypto_box_MACBYTES + 32, nonce.data(),
                           server_public_.data(), temporary_secret_.data()) != 0) {
    return std::nullopt;
  }
  // The vouch: C' and S boxed from c for S', which only this connection's server holds the secret of.
  uint8_t vouched[64];
  std::memcpy(vouched, temporary_public_.data(), 32);
  std::memcpy(vouched + 32, server_public_.data(), 32);
  // Inside the INITIATE's box, as CurveZMQ has it: C (never in clear), the vouch's nonce, the vouch.
  uint8_t inner[kInitiateBoxed];
  std::memcpy(inner, own_public_.data(), 32);
  randombytes_buf(inner + 32, 16);
  const Nonce vouch_nonce = step_nonce(kVouchNonce, inner + 32, 16);
  if (crypto_box_easy(inner + 48, vouched, sizeof vouched, vouch_nonce.data(), server_temporary.data(),
                      own_secret_.data()) != 0) {
    return std::nullopt;
  }
  uint8_t random_initiate[8];
  randombytes_buf(random_initiate, sizeof random_initiate);
  const Nonce initiate_nonce = step_nonce(kInitiateNonce, random_initiate, sizeof random_initiate);
  uint8_t boxed[crypto_box_MACBYTES + kInitiateBoxed];
  if (crypto_box_easy(boxed, inner, sizeof inner, initiate_nonce.data(), server_temporary.data(),
                      temporary_secret_.data()) != 0) {
    return std::nullopt;
  }
  session_ = session_of(server_temporary.data(), temporary_secret_.data(), /*client=*/true);
  if (!session_) return std::nullopt;
  std::string initiate(kInitiate);
  append(initiate, random_initiate, sizeof random_initiate);
  append(initiate, boxed, sizeof boxed);
  return initiate;
}

std::optional<SecureSession> ClientHandshake::ready(std::string_view ready) {
  if (!session_) return std::nullopt;
  const std::optional<std::string> opened = session_->open(ready);
  if (!opened || *opened != kReady) return std::nullopt;
  std::optional<SecureSession> session = std::move(session_);
  session_.reset();
  return session;
}

ServerHandshake::ServerHandshake(const CurveKeyPair& own, const std::vector<std::string>& allowed)
    : own_(own), allowed_(allowed) {
  init_sodium();
}

ServerHandshake::~ServerHandshake() { sodium_memzero(temporary_secret_.data(), temporary_secret_.size()); }

std::optional<std::string> ServerHandshake::hello(std::string_view hello) {
  if (welcomed_ || hello.size() != kHelloSize || hello.substr(0, 4) != kHello) return std::nullopt;
  const uint8_t* client_temporary = bytes(hello.substr(4));
  const uint8_t* random = client_temporary + 32;
  const Nonce nonce = step_nonce(kHelloNonce, random, 8);
  Key own_secret = decode(own_.secret_key);
  uint8_t zeros[kHelloPadding];
  const bool opened = crypto_box_open_easy(zeros, random + 8, crypto_box_MACBYTES + kHelloPadding, nonce.data(),
                                           client_temporary, own_secret.data()) == 0;
  if (!opened) {
    sodium_memzero(own_secret.data(), own_secret.size());
    return std::nullopt;
  }
  std::memcpy(client_temporary_.data(), client_temporary, 32);
  crypto_box_keypair(temporary_public_.data(), temporary_secret_.data());
  uint8_t welcome_random[16];
  randombytes_buf(welcome_random, sizeof welcome_random);
  const Nonce welcome_nonce = step_nonce(kWelcomeNonce, welcome_random, sizeof welcome_random);
  uint8_t boxed[crypto_box_MACBYTES + 32];
  const bool sealed = crypto_box_easy(boxed, temporary_public_.data(), 32, welcome_nonce.data(),
                                      client_temporary_.data(), own_secret.data()) == 0;
  sodium_memzero(own_secret.data(), own_secret.size());
  if (!sealed) return std::nullopt;
  welcomed_ = true;
  std::string welcome(kWelcome);
  append(welcome, welcome_random, sizeof welcome_random);
  append(welcome, boxed, sizeof boxed);
  return welcome;
}

bool handshake_frame_too_long(std::string_view buffer, size_t at) {
  static_assert(kMaxHandshakeFrame < 256);
  if (buffer.size() < at + 4) return false;
  return static_cast<uint8_t>(buffer[at + 1]) + static_cast<uint8_t>(buffer[at + 2]) +
             static_cast<uint8_t>(buffer[at + 3]) !=
         0;
}

std::optional<ServerAccepted> ServerHandshake::initiate(std::string_view initiate) {
  if (!welcomed_ || initiate.size() != kInitiateSize || initiate.substr(0, 4) != kInitiate) return std::nullopt;
  welcomed_ = false;  // one INITIATE a HELLO, good or bad
  const uint8_t* random = bytes(initiate.substr(4));
  const Nonce nonce = step_nonce(kInitiateNonce, random, 8);
  uint8_t inner[kInitiateBoxed];
  if (crypto_box_open_easy(inner, random + 8, crypto_box_MACBYTES + kInitiateBoxed, nonce.data(),
                           client_temporary_.data(), temporary_secret_.data()) != 0) {
    return std::nullopt;
  }
  const uint8_t* client_public = inner;  // C, read only from inside the box
  const bool listed = std::any_of(allowed_.begin(), allowed_.end(), [&](const std::string& z85) {
    return z85.size() == 40 && sodium_memcmp(decode(z85).data(), client_public, 32) == 0;
  });
  if (!listed) return std::nullopt;
  const Nonce vouch_nonce = step_nonce(kVouchNonce, inner + 32, 16);
  uint8_t vouched[64];
  if (crypto_box_open_easy(vouched, inner + 48, kVouchSize, vouch_nonce.data(), client_public,
                           temporary_secret_.data()) != 0) {
    return std::nullopt;
  }
  const Key own_public = decode(own_.public_key);
  if (sodium_memcmp(vouched, client_temporary_.data(), 32) != 0 ||
      sodium_memcmp(vouched + 32, own_public.data(), 32) != 0) {
    return std::nullopt;
  }
  std::optional<SecureSession> session =
      session_of(client_temporary_.data(), temporary_secret_.data(), /*client=*/false);
  sodium_memzero(temporary_secret_.data(), temporary_secret_.size());
  if (!session) return std::nullopt;
  std::string ready = session->seal(kReady);
  return ServerAccepted{std::move(ready), std::move(*session), encode(client_public)};
}

}  // namespace warp::transfer
