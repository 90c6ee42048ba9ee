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

constexpr std::string_view kHello = "WSH1", kWelcome = "WSW1";
constexpr size_t kBoxedKey = crypto_box_MACBYTES + 32;
constexpr size_t kHelloSize = 4 + 32 + 32 + crypto_box_NONCEBYTES + kBoxedKey;
constexpr size_t kWelcomeSize = 4 + crypto_box_NONCEBYTES + kBoxedKey;

void init_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw Error("libsodium could not be initialized");
}

Key decode(const std::string& z85) {
  Key key{};
  if (z85.size() != 40 || zmq_z85_decode(key.data(), z85.c_str()) == nullptr) throw Error("not a Z85 Curve key");
  return key;
}

const uint8_t* bytes(std::string_view text) { return reinterpret_cast<const uint8_t*>(text.data()); }

}  // namespace

void append_stream_frame(std::string& out, std::string_view body) {
  const uint32_t size = static_cast<uint32_t>(body.size());
  const uint8_t length[4] = {static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8), static_cast<uint8_t>(size >> 16),
                             static_cast<uint8_t>(size >> 24)};
  out.append(reinterpret_cast<const char*>(length), 4);
  out.append(body);
}

std::optional<std::string_view> next_stream_frame(std::string_view buffer, size_t& at) {
  if (buffer.size() - at < 4) return std::nullopt;
  const uint8_t* length = bytes(buffer.substr(at, 4));
  const uint32_t size = length[0] | uint32_t{length[1]} << 8 | uint32_t{length[2]} << 16 | uint32_t{length[3]} << 24;
  if (size > kMaxStreamFrame) throw Error("a stream frame of " + std::to_string(size) + " bytes (at most " + std::to_string(kMaxStreamFrame) + ")");
  if (buffer.size() - at - 4 < size) return std::nullopt;
  const std::string_view body = buffer.substr(at + 4, size);
  at += 4 + size;
  return body;
}

SecureSession::SecureSession(const uint8_t* shared_key, bool client)
    : send_side_(client ? 'C' : 'S'), receive_side_(client ? 'S' : 'C') {
  std::memcpy(key_.data(), shared_key, key_.size());
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
  std::string body(crypto_box_MACBYTES + payload.size(), '\0');
  const auto nonce = frame_nonce(send_side_, sent_++);
  if (crypto_box_easy_afternm(reinterpret_cast<uint8_t*>(body.data()), bytes(payload), payload.size(), nonce.data(), key_.data()) != 0) {
    throw Error("a frame could not be sealed");
  }
  return body;
}

std::optional<std::string> SecureSession::open(std::string_view body) {
  if (body.size() < crypto_box_MACBYTES) return std::nullopt;
  std::string payload(body.size() - crypto_box_MACBYTES, '\0');
  const auto nonce = frame_nonce(receive_side_, received_);
  if (crypto_box_open_easy_afternm(reinterpret_cast<uint8_t*>(payload.data()), bytes(body), body.size(), nonce.data(), key_.data()) != 0) {
    return std::nullopt;
  }
  ++received_;
  return payload;
}

ClientHandshake::ClientHandshake(const CurveKeyPair& own, const std::string& server_public)
    : server_public_(decode(server_public)), own_public_(decode(own.public_key)), own_secret_(decode(own.secret_key)) {
  init_sodium();
  crypto_box_keypair(temporary_public_.data(), temporary_secret_.data());
  uint8_t nonce[crypto_box_NONCEBYTES];
  randombytes_buf(nonce, sizeof nonce);
  uint8_t boxed[kBoxedKey];
  if (crypto_box_easy(boxed, temporary_public_.data(), 32, nonce, server_public_.data(), own_secret_.data()) != 0) {
    throw Error("the leaf's Curve public key is not usable");
  }
  hello_.append(kHello);
  hello_.append(reinterpret_cast<const char*>(temporary_public_.data()), 32);
  hello_.append(reinterpret_cast<const char*>(own_public_.data()), 32);
  hello_.append(reinterpret_cast<const char*>(nonce), sizeof nonce);
  hello_.append(reinterpret_cast<const char*>(boxed), sizeof boxed);
}

std::optional<SecureSession> ClientHandshake::finish(std::string_view welcome) const {
  if (welcome.size() != kWelcomeSize || welcome.substr(0, 4) != kWelcome) return std::nullopt;
  const uint8_t* nonce = bytes(welcome.substr(4));
  Key server_temporary;
  if (crypto_box_open_easy(server_temporary.data(), nonce + crypto_box_NONCEBYTES, kBoxedKey, nonce, server_public_.data(),
                           own_secret_.data()) != 0) {
    return std::nullopt;
  }
  uint8_t shared[crypto_box_BEFORENMBYTES];
  if (crypto_box_beforenm(shared, server_temporary.data(), temporary_secret_.data()) != 0) return std::nullopt;
  SecureSession session(shared, /*client=*/true);
  sodium_memzero(shared, sizeof shared);
  return session;
}

std::optional<ServerAccepted> accept_hello(std::string_view hello, const CurveKeyPair& own, const std::vector<std::string>& allowed) {
  init_sodium();
  if (hello.size() != kHelloSize || hello.substr(0, 4) != kHello) return std::nullopt;
  const uint8_t* client_temporary = bytes(hello.substr(4));
  const uint8_t* client_public = client_temporary + 32;
  const uint8_t* nonce = client_public + 32;
  const bool listed = std::any_of(allowed.begin(), allowed.end(), [&](const std::string& z85) {
    return z85.size() == 40 && sodium_memcmp(decode(z85).data(), client_public, 32) == 0;
  });
  if (!listed) return std::nullopt;
  const Key own_secret = decode(own.secret_key);
  Key opened;
  if (crypto_box_open_easy(opened.data(), nonce + crypto_box_NONCEBYTES, kBoxedKey, nonce, client_public, own_secret.data()) != 0 ||
      sodium_memcmp(opened.data(), client_temporary, 32) != 0) {
    return std::nullopt;
  }
  Key temporary_public, temporary_secret;
  crypto_box_keypair(temporary_public.data(), temporary_secret.data());
  uint8_t welcome_nonce[crypto_box_NONCEBYTES];
  randombytes_buf(welcome_nonce, sizeof welcome_nonce);
  uint8_t boxed[kBoxedKey];
  if (crypto_box_easy(boxed, temporary_public.data(), 32, welcome_nonce, client_public, own_secret.data()) != 0) return std::nullopt;
  uint8_t shared[crypto_box_BEFORENMBYTES];
  if (crypto_box_beforenm(shared, client_temporary, temporary_secret.data()) != 0) return std::nullopt;
  sodium_memzero(temporary_secret.data(), temporary_secret.size());
  std::string welcome(kWelcome);
  welcome.append(reinterpret_cast<const char*>(welcome_nonce), sizeof welcome_nonce);
  welcome.append(reinterpret_cast<const char*>(boxed), sizeof boxed);
  ServerAccepted accepted{std::move(welcome), SecureSession(shared, /*client=*/false)};
  sodium_memzero(shared, sizeof shared);
  return accepted;
}

}  // namespace warp::transfer
