// The direct search path's framing and Curve handshake (common/transfer/secure_channel): frames
// split anywhere, the handshake between keys that match, and every way it must fail: a client off
// the allow-list, a client without the secret key of the public key it shows, a server without
// the secret key the client expects, frames altered, replayed, reordered or from the other side.
#include <gtest/gtest.h>

#include <random>

#include "common/transfer/secure_channel.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace {

struct Keys {
  CurveKeyPair server = generate_curve_key_pair(), client = generate_curve_key_pair(), other = generate_curve_key_pair();
};

std::pair<SecureSession, SecureSession> handshake(const Keys& keys) {
  ClientHandshake client(keys.client, keys.server.public_key);
  auto accepted = accept_hello(client.hello(), keys.server, {keys.other.public_key, keys.client.public_key});
  EXPECT_TRUE(accepted.has_value());
  auto session = client.finish(accepted->welcome);
  EXPECT_TRUE(session.has_value());
  return {std::move(*session), std::move(accepted->session)};
}

TEST(StreamFrames, SplitAtEveryByteAndJoined) {
  std::mt19937 random(std::random_device{}());
  std::vector<std::string> bodies;
  std::string stream;
  for (int i = 0; i < 20; ++i) {
    std::string body(random() % 3000, '\0');
    for (char& c : body) c = static_cast<char>(random());
    append_stream_frame(stream, body);
    bodies.push_back(body);
  }
  // Fed in random pieces, as reads deliver them: the same frames in order.
  std::string received;
  size_t at = 0, fed = 0;
  std::vector<std::string> frames;
  while (fed < stream.size()) {
    const size_t piece = std::min<size_t>(stream.size() - fed, 1 + random() % 700);
    received.append(stream, fed, piece);
    fed += piece;
    while (auto frame = next_stream_frame(received, at)) frames.emplace_back(*frame);
  }
  EXPECT_EQ(at, received.size());
  ASSERT_EQ(frames.size(), bodies.size());
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(frames[i], bodies[i]) << i;
}

TEST(StreamFrames, OversizedLengthIsAnError) {
  std::string stream("\xff\xff\xff\x7f", 4);
  size_t at = 0;
  EXPECT_THROW(next_stream_frame(stream, at), Error);
}

TEST(SecureChannel, BothWaysInOrder) {
  Keys keys;
  auto [client, server] = handshake(keys);
  for (int i = 0; i < 100; ++i) {
    const std::string request = "request " + std::to_string(i), reply(i * 37, static_cast<char>(i));
    const std::string sealed = client.seal(request);
    EXPECT_EQ(sealed.find(request), std::string::npos);  // encrypted, not only signed
    EXPECT_EQ(server.open(sealed), request);
    EXPECT_EQ(client.open(server.seal(reply)), reply);
  }
}

TEST(SecureChannel, ClientOffTheAllowListIsRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  EXPECT_FALSE(accept_hello(client.hello(), keys.server, {keys.other.public_key}).has_value());
  EXPECT_FALSE(accept_hello(client.hello(), keys.server, {}).has_value());
}

TEST(SecureChannel, PublicKeyWithoutItsSecretIsRefused) {
  Keys keys;
  // Shows the allowed client's public key, holds another secret key.
  CurveKeyPair impostor{keys.client.public_key, keys.other.secret_key};
  ClientHandshake client(impostor, keys.server.public_key);
  EXPECT_FALSE(accept_hello(client.hello(), keys.server, {keys.client.public_key}).has_value());
}

TEST(SecureChannel, ServerWithoutTheExpectedSecretIsRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  // Another pair cannot read a HELLO made for the server's key...
  EXPECT_FALSE(accept_hello(client.hello(), keys.other, {keys.client.public_key}).has_value());
  // ...and a WELCOME it makes (from a HELLO addressed to it) does not open for a client that
  // expects the server's key: an impostor cannot pose as the leaf.
  ClientHandshake addressed_to_impostor(keys.client, keys.other.public_key);
  auto impostor = accept_hello(addressed_to_impostor.hello(), keys.other, {keys.client.public_key});
  ASSERT_TRUE(impostor.has_value());
  EXPECT_FALSE(client.finish(impostor->welcome).has_value());
  // A genuine WELCOME altered in any byte does not either.
  auto genuine = accept_hello(client.hello(), keys.server, {keys.client.public_key});
  ASSERT_TRUE(genuine.has_value());
  for (size_t i = 0; i < genuine->welcome.size(); i += 7) {
    std::string altered = genuine->welcome;
    altered[i] ^= 1;
    EXPECT_FALSE(client.finish(altered).has_value()) << i;
  }
  EXPECT_TRUE(client.finish(genuine->welcome).has_value());
}

TEST(SecureChannel, HelloAlteredOrTruncatedIsRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  for (size_t i = 0; i < client.hello().size(); i += 5) {
    std::string altered = client.hello();
    altered[i] ^= 0x20;
    EXPECT_FALSE(accept_hello(altered, keys.server, {keys.client.public_key}).has_value()) << i;
  }
  EXPECT_FALSE(accept_hello(client.hello().substr(0, 100), keys.server, {keys.client.public_key}).has_value());
  EXPECT_FALSE(accept_hello("", keys.server, {keys.client.public_key}).has_value());
}

TEST(SecureChannel, AlteredReplayedReorderedOrReflectedFramesFail) {
  Keys keys;
  auto [client, server] = handshake(keys);
  const std::string first = client.seal("first"), second = client.seal("second");
  std::string altered = first;
  altered.back() ^= 1;
  EXPECT_FALSE(server.open(altered).has_value());
  EXPECT_FALSE(server.open(second).has_value());  // out of order
  EXPECT_EQ(server.open(first), "first");
  EXPECT_FALSE(server.open(first).has_value());  // replayed
  EXPECT_EQ(server.open(second), "second");
  // A client's frame sent back to it as if from the server.
  const std::string third = client.seal("third");
  EXPECT_FALSE(client.open(third).has_value());
  // Another connection's frames do not open in this one (fresh keys each handshake).
  auto [client2, server2] = handshake(keys);
  EXPECT_FALSE(server.open(client2.seal("elsewhere")).has_value());
  EXPECT_EQ(server.open(third), "third");
}

}  // namespace
}  // namespace warp::transfer
