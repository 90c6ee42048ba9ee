// libFuzzer: bytes a client could send to a leaf's direct search path with Curve on, read as the
// leaf's front end reads them (common/transfer/secure_channel): stream frames of any length, the
// first taken as a HELLO, the second as an INITIATE, the rest opened as sealed frames. The first
// input byte chooses raw bytes (a stranger: neither step may accept random bytes; where a HELLO
// were taken, no INITIATE may be, as only a holder of an allowed secret key can make one)
// or a genuine handshake followed by the input's pieces, each sealed by the client or sent as it
// is, some altered: every sealed, unaltered frame must open to its bytes, in order, and nothing
// else may open.
#include <cstdlib>
#include <string>
#include <vector>

#include "common/transfer/secure_channel.hpp"
#include "common/util/status.hpp"

namespace {

struct Keys {
  warp::transfer::CurveKeyPair server = warp::transfer::generate_curve_key_pair();
  warp::transfer::CurveKeyPair client = warp::transfer::generate_curve_key_pair();
  std::vector<std::string> allowed = {client.public_key};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Keys* keys = new Keys();
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {  // a stranger's stream
    size_t at = 0;
    try {
      warp::transfer::ServerHandshake server(keys->server, keys->allowed);
      for (int step = 0; auto body = warp::transfer::next_stream_frame(input, at); ++step) {
        if (step == 0 && server.hello(*body)) std::abort();
        if (step == 1 && server.initiate(*body)) std::abort();
      }
    } catch (const warp::Error&) {  // a frame length past the limit: the leaf closes the connection
    }
    return 0;
  }
  warp::transfer::ClientHandshake client(keys->client, keys->server.public_key);
  warp::transfer::ServerHandshake handshake(keys->server, keys->allowed);
  const auto welcome = handshake.hello(client.hello());
  if (!welcome) std::abort();
  const auto initiate = client.welcome(*welcome);
  if (!initiate) std::abort();
  auto accepted = handshake.initiate(*initiate);
  if (!accepted) std::abort();
  auto client_session = client.ready(accepted->ready);
  if (!client_session) std::abort();
  warp::transfer::SecureSession& server = accepted->session;
  // Pieces of the input: [kind][length][bytes]. kind bit 0: sealed; bit 1: one byte altered.
  size_t at = 0;
  while (at + 2 <= input.size()) {
    const uint8_t kind = static_cast<uint8_t>(input[at]);
    const size_t length = std::min<size_t>(static_cast<uint8_t>(input[at + 1]), input.size() - at - 2);
    const std::string payload = input.substr(at + 2, length);
    at += 2 + length;
    std::string frame = (kind & 1) ? client_session->seal(payload) : payload;
    const bool altered = (kind & 2) && !frame.empty();
    if (altered) frame[static_cast<size_t>(kind) % frame.size()] ^= static_cast<char>(1 + (kind >> 2));
    std::string stream;
    warp::transfer::append_stream_frame(stream, frame);
    size_t read = 0;
    const auto body = warp::transfer::next_stream_frame(stream, read);
    if (!body || *body != frame) std::abort();
    const auto opened = server.open(*body);
    if ((kind & 1) && !altered) {
      if (!opened || *opened != payload) std::abort();  // a genuine frame must open, exactly
    } else if (opened) {
      std::abort();  // raw or altered bytes must never open
    } else if (kind & 1) {
      return 0;  // the client's counter ran ahead of the server's: the connection would be closed
    }
  }
  return 0;
}
