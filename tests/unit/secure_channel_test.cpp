// The direct search path's framing and Curve handshake (common/transfer/secure_channel): frames
// split anywhere, the handshake between keys that match, and every way it must fail: a client off
// the allow-list, a client without the secret key of the public key it shows, a server without
// the secret key the client expects, a thief of the client's secret posing as the server, a
// recorded handshake replayed, messages out of turn, frames altered, replayed, reordered or from
// the other side.
#include <gtest/gtest.h>

#include <type_traits>
#include <sodium.h>
#include <zmq.h>

#include <random>

#include "common/transfer/secure_channel.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace {

struct Keys {
  CurveKeyPair server = generate_curve_key_pair(), client = generate_curve_key_pair(),
               other = generate_curve_key_pair();
  std::vector<std::string> allowed = {other.public_key, client.public_key};
};

// The four messages between a client and a server; the sessions of both, or what failed.
struct HandshakeRun {
  std::string hello, welcome, initiate, ready;
  std::optional<SecureSession> client, server;
};
HandshakeRun run_handshake(const CurveKeyPair& client_keys, const std::string& server_public,
                           const CurveKeyPair& server_keys, const std::vector<std::string>& allowed) {
  HandshakeRun run;
  ClientHandshake client(client_keys, server_public);
  ServerHandshake server(server_keys, allowed);
  run.hello = client.hello();
  const auto welcome = server.hello(run.hello);
  if (!welcome) return run;
  run.welcome = *welcome;
  const auto initiate = client.welcome(run.welcome);
  if (!initiate) return run;
  run.initiate = *initiate;
  auto accepted = server.initiate(run.initiate);
  if (!accepted) return run;
  EXPECT_EQ(accepted->client, client_keys.public_key);
  run.ready = accepted->ready;
  run.server.emplace(std::move(accepted->session));
  run.client = client.ready(run.ready);
  return run;
}

std::pair<SecureSession, SecureSession> handshake(const Keys& keys) {
  HandshakeRun run = run_handshake(keys.client, keys.server.public_key, keys.server, keys.allowed);
  EXPECT_TRUE(run.client.has_value() && run.server.has_value());
  return {std::move(*run.client), std::move(*run.server)};
}

std::array<uint8_t, 32> raw(const std::string& z85) {
  std::array<uint8_t, 32> key{};
  zmq_z85_decode(key.data(), z85.c_str());
  return key;
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

// A copy of a session would seal under the nonces the original uses next: sessions only move, and
// a moved-from one neither seals nor opens.
static_assert(!std::is_copy_constructible_v<SecureSession> && !std::is_copy_assignable_v<SecureSession>);
static_assert(std::is_nothrow_move_constructible_v<SecureSession>);

TEST(SecureChannel, AMovedFromSessionNeitherSealsNorOpens) {
  Keys keys;
  auto [client, server] = handshake(keys);
  SecureSession moved = std::move(client);
  const std::string sealed = moved.seal("request");
  EXPECT_EQ(server.open(sealed), "request");
  const std::string reply = server.seal("reply");
  EXPECT_THROW(client.seal("request"), Error);  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(client.open(reply), std::nullopt);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.open(reply), "reply");
}

TEST(SecureChannel, ClientOffTheAllowListIsRefused) {
  Keys keys;
  for (const std::vector<std::string>& allowed :
       {std::vector<std::string>{keys.other.public_key}, std::vector<std::string>{}}) {
    const HandshakeRun run = run_handshake(keys.client, keys.server.public_key, keys.server, allowed);
    EXPECT_FALSE(run.welcome.empty());  // the HELLO names no client
    EXPECT_FALSE(run.initiate.empty());
    EXPECT_TRUE(run.ready.empty());  // the INITIATE does, and is refused
    EXPECT_FALSE(run.server.has_value());
  }
}

TEST(SecureChannel, PublicKeyWithoutItsSecretIsRefused) {
  Keys keys;
  // Shows the allowed client's public key, holds another secret key: its vouch does not open.
  const CurveKeyPair impostor{keys.client.public_key, keys.other.secret_key};
  const HandshakeRun run = run_handshake(impostor, keys.server.public_key, keys.server, {keys.client.public_key});
  EXPECT_FALSE(run.initiate.empty());
  EXPECT_FALSE(run.server.has_value());
}

TEST(SecureChannel, ServerWithoutTheExpectedSecretIsRefused) {
  Keys keys;
  // Another pair cannot read a HELLO made for the server's key...
  {
    ClientHandshake client(keys.client, keys.server.public_key);
    ServerHandshake other(keys.other, keys.allowed);
    EXPECT_FALSE(other.hello(client.hello()).has_value());
  }
  // ...and a WELCOME it makes (from a HELLO addressed to it) does not open for a client that
  // expects the server's key: an impostor cannot pose as the leaf.
  {
    ClientHandshake client(keys.client, keys.server.public_key);
    ClientHandshake addressed_to_impostor(keys.client, keys.other.public_key);
    ServerHandshake impostor(keys.other, keys.allowed);
    const auto welcome = impostor.hello(addressed_to_impostor.hello());
    ASSERT_TRUE(welcome.has_value());
    EXPECT_FALSE(client.welcome(*welcome).has_value());
  }
  // A genuine WELCOME altered in any byte does not either.
  ClientHandshake client(keys.client, keys.server.public_key);
  ServerHandshake server(keys.server, keys.allowed);
  const auto genuine = server.hello(client.hello());
  ASSERT_TRUE(genuine.has_value());
  for (size_t i = 0; i < genuine->size(); i += 3) {
    std::string altered = *genuine;
    altered[i] ^= 1;
    EXPECT_FALSE(client.welcome(altered).has_value()) << i;
  }
  EXPECT_TRUE(client.welcome(*genuine).has_value());
}

// The first version boxed the WELCOME from the server's secret to the client's long-term key, a
// box that the client's own secret makes as well: a thief of a broker's key could pose as any leaf
// to it. Now the WELCOME is boxed for the connection's fresh key, and such a box does not open.
TEST(SecureChannel, ThiefOfTheClientsSecretCannotPoseAsTheServer) {
  Keys keys;
  ASSERT_GE(sodium_init(), 0);
  ClientHandshake client(keys.client, keys.server.public_key);
  std::string forged = "WSW2";
  uint8_t nonce[crypto_box_NONCEBYTES] = {'W', 'S', 'W', '2', '-', 'w', 'e', 'l'};
  randombytes_buf(nonce + 8, 16);
  forged.append(reinterpret_cast<const char*>(nonce + 8), 16);
  uint8_t fake_public[32], fake_secret[32], boxed[crypto_box_MACBYTES + 32];
  crypto_box_keypair(fake_public, fake_secret);
  const auto server_public = raw(keys.server.public_key), client_secret = raw(keys.client.secret_key);
  ASSERT_EQ(crypto_box_easy(boxed, fake_public, 32, nonce, server_public.data(), client_secret.data()), 0);
  forged.append(reinterpret_cast<const char*>(boxed), sizeof boxed);
  EXPECT_FALSE(client.welcome(forged).has_value());
}

TEST(SecureChannel, RecordedHandshakeReplayedIsRefused) {
  Keys keys;
  const HandshakeRun recorded = run_handshake(keys.client, keys.server.public_key, keys.server, keys.allowed);
  ASSERT_TRUE(recorded.server.has_value());
  // The HELLO replays (it proves nothing but a fresh key), the INITIATE does not: its vouch is for
  // the other connection's server key.
  ServerHandshake server(keys.server, keys.allowed);
  ASSERT_TRUE(server.hello(recorded.hello).has_value());
  EXPECT_FALSE(server.initiate(recorded.initiate).has_value());
  // Nor does the INITIATE of another connection after a genuine HELLO of this one.
  ClientHandshake client(keys.client, keys.server.public_key);
  ServerHandshake second(keys.server, keys.allowed);
  ASSERT_TRUE(second.hello(client.hello()).has_value());
  EXPECT_FALSE(second.initiate(recorded.initiate).has_value());
}

TEST(SecureChannel, MessagesOutOfTurnAreRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  ServerHandshake server(keys.server, keys.allowed);
  EXPECT_FALSE(client.ready("anything").has_value());                // before a WELCOME
  EXPECT_FALSE(server.initiate(std::string(156, 'x')).has_value());  // before a HELLO
  const auto welcome = server.hello(client.hello());
  ASSERT_TRUE(welcome.has_value());
  EXPECT_FALSE(server.hello(client.hello()).has_value());    // a second HELLO
  EXPECT_FALSE(client.welcome(client.hello()).has_value());  // its own HELLO back as the WELCOME
  const auto initiate = client.welcome(*welcome);
  ASSERT_TRUE(initiate.has_value());
  EXPECT_FALSE(client.welcome(*welcome).has_value());  // a second WELCOME
  std::string altered = *initiate;
  altered[60] ^= 1;
  EXPECT_FALSE(server.initiate(altered).has_value());
  EXPECT_FALSE(server.initiate(*initiate).has_value());  // one INITIATE a HELLO, the first was bad
}

TEST(SecureChannel, ReadyAlteredIsRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  ServerHandshake server(keys.server, keys.allowed);
  const auto initiate = client.welcome(*server.hello(client.hello()));
  ASSERT_TRUE(initiate.has_value());
  auto accepted = server.initiate(*initiate);
  ASSERT_TRUE(accepted.has_value());
  std::string altered = accepted->ready;
  altered.back() ^= 1;
  EXPECT_FALSE(client.ready(altered).has_value());
}

TEST(SecureChannel, HelloAlteredOrTruncatedIsRefused) {
  Keys keys;
  ClientHandshake client(keys.client, keys.server.public_key);
  for (size_t i = 0; i < client.hello().size(); i += 5) {
    std::string altered = client.hello();
    altered[i] ^= 0x20;
    ServerHandshake server(keys.server, keys.allowed);
    EXPECT_FALSE(server.hello(altered).has_value()) << i;
  }
  ServerHandshake server(keys.server, keys.allowed);
  EXPECT_FALSE(server.hello(client.hello().substr(0, 100)).has_value());
  EXPECT_FALSE(server.hello("").has_value());
  EXPECT_LE(client.hello().size(), kMaxHandshakeFrame);
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

namespace warp::transfer {
namespace {

// The client's long-term key never travels in clear: an INITIATE does not hold its 32 bytes, and
// one whose box is altered is refused before the key inside is read.
TEST(SecureChannel, TheClientsLongTermKeyIsOnlyInsideTheInitiatesBox) {
  const CurveKeyPair server_keys = generate_curve_key_pair(), client_keys = generate_curve_key_pair();
  const std::vector<std::string> allowed{client_keys.public_key};
  ServerHandshake server(server_keys, allowed);
  ClientHandshake client(client_keys, server_keys.public_key);
  const auto welcome = server.hello(client.hello());
  ASSERT_TRUE(welcome.has_value());
  const auto initiate = client.welcome(*welcome);
  ASSERT_TRUE(initiate.has_value());
  const auto key = raw(client_keys.public_key);
  const std::string client_public(reinterpret_cast<const char*>(key.data()), key.size());
  EXPECT_EQ(initiate->find(client_public), std::string::npos) << "the broker's key in clear in the INITIATE";
  ASSERT_TRUE(server.initiate(*initiate).has_value());
}

TEST(SecureChannel, AFrameLongerThanAHandshakeMessageIsSeenFromItsLength) {
  std::string stream;
  append_stream_frame(stream, std::string(kMaxHandshakeFrame, 'h'));
  EXPECT_FALSE(handshake_frame_too_long(stream, 0));
  append_stream_frame(stream, std::string(kMaxHandshakeFrame + 1, 'x'));
  EXPECT_TRUE(handshake_frame_too_long(stream, 4 + kMaxHandshakeFrame));
  EXPECT_FALSE(handshake_frame_too_long(stream.substr(0, 4 + kMaxHandshakeFrame + 3), 4 + kMaxHandshakeFrame))
      << "three bytes of a length are not yet a length";
  std::string huge("\x00\x00\x00\x04", 4);  // 64 MiB announced
  EXPECT_TRUE(handshake_frame_too_long(huge, 0));
}

}  // namespace
}  // namespace warp::transfer
