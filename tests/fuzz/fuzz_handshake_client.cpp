// libFuzzer: the client's side of the direct search path's handshake (a broker connecting to a
// leaf, common/transfer/secure_channel), against what a hostile or broken server could send. The
// first input byte chooses:
//   even: a stranger's stream: its frames offered as the WELCOME, then the READY. None may be taken
//         (a WELCOME is boxed from the server's secret key for the client's fresh key), and a READY
//         never before a WELCOME;
//   odd:  a genuine server whose WELCOME and READY the input alters (a byte at a position it names,
//         by a value it names, or a frame cut or grown): an altered frame is refused, an unaltered
//         one taken, and the sessions then agree on a frame each way.
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

// Alters `frame` as the 3 bytes at `at` of `input` say; true when it changed.
bool alter(std::string& frame, const std::string& input, size_t at) {
  if (at + 3 > input.size()) return false;
  const uint8_t how = static_cast<uint8_t>(input[at]), where = static_cast<uint8_t>(input[at + 1]);
  const uint8_t value = static_cast<uint8_t>(input[at + 2]);
  switch (how % 4) {
    case 0:
      return false;
    case 1:
      if (value == 0 || frame.empty()) return false;
      frame[where % frame.size()] ^= static_cast<char>(value);
      return true;
    case 2:
      if (frame.empty()) return false;
      frame.resize(where % frame.size());
      return true;
    default:
      frame.append(1 + value % 16, static_cast<char>(where));
      return true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Keys* keys = new Keys();
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  warp::transfer::ClientHandshake client(keys->client, keys->server.public_key);
  if (data[0] % 2 == 0) {
    size_t at = 0;
    try {
      for (int step = 0; step < 2 && !warp::transfer::handshake_frame_too_long(input, at); ++step) {
        const auto body = warp::transfer::next_stream_frame(input, at);  // the broker closes on a longer one
        if (!body) break;
        if (step == 0 && client.welcome(*body)) std::abort();
        if (step == 1 && client.ready(*body)) std::abort();
      }
    } catch (const warp::Error&) {  // a frame length past the limit: the broker closes the link
    }
    return 0;
  }
  warp::transfer::ServerHandshake server(keys->server, keys->allowed);
  auto welcome = server.hello(client.hello());
  if (!welcome) std::abort();
  const bool welcome_altered = alter(*welcome, input, 0);
  const auto initiate = client.welcome(*welcome);
  if (welcome_altered) {
    if (initiate) std::abort();  // an altered WELCOME taken
    return 0;
  }
  if (!initiate) std::abort();
  auto accepted = server.initiate(*initiate);
  if (!accepted) std::abort();
  std::string ready = accepted->ready;
  const bool ready_altered = alter(ready, input, 3);
  auto session = client.ready(ready);
  if (ready_altered) {
    if (session) std::abort();  // an altered READY taken
    return 0;
  }
  if (!session) std::abort();
  const std::string payload = input.size() > 6 ? input.substr(6) : "x";
  const auto there = accepted->session.open(session->seal(payload));
  const auto back = session->open(accepted->session.seal(payload));
  if (!there || *there != payload || !back || *back != payload) std::abort();
  return 0;
}
