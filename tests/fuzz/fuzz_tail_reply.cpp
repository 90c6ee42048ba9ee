// libFuzzer: what a leaf reads from the indexer's write-log tail (common/transfer/tail_frames):
// a tail reply's frame, or one encoded LoggedWrite, from the input's bytes; or a write made of the
// input (terms, its words in order as indexes into them, the title's share) encoded and decoded. A
// write read is one a leaf can apply: its words in order index its terms and are as many as its
// length (or none), the title's no more than them; word positions are made of them, and it
// encodes again to a write that decodes the same. A made write decodes exactly when it is such a
// write.
#include <zmq.hpp>

#include <cstdlib>
#include <string>

#include "common/index/word_positions.hpp"
#include "common/transfer/tail_frames.hpp"
#include "common/util/status.hpp"

namespace {

bool applicable(const warp::LoggedWrite& write) {
  if (!write.tokens.empty() && write.tokens.size() != write.length) return false;
  if (write.title_tokens > write.tokens.size()) return false;
  for (uint32_t token : write.tokens)
    if (token >= write.terms.size()) return false;
  return true;
}

void check(const warp::LoggedWrite& write) {
  if (!applicable(write)) std::abort();
  if (!write.tokens.empty()) {
    warp::PositionsBuilder positions(warp::AnalyzerConfig{}, 0);
    positions.add_tokens(0, write.terms, write.tokens, write.title_tokens);
    if (positions.position_count() != write.tokens.size()) std::abort();
    (void)positions.rows();
  }
  const warp::LoggedWrite again = warp::transfer::decode_logged_write(warp::transfer::encode_logged_write(write));
  if (again.tokens != write.tokens || again.title_tokens != write.title_tokens || again.terms != write.terms ||
      again.id != write.id || again.sequence != write.sequence || again.length != write.length)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        check(warp::transfer::decode_logged_write(input));
        break;
      case 1: {
        const warp::transfer::TailAnswer answer =
            warp::transfer::read_tail_reply(zmq::message_t(input.data(), input.size()), 0);
        for (const warp::LoggedWrite& write : answer.writes) check(write);
        break;
      }
      default: {  // a write made of the bytes: terms, then words in order, then the title's share
        warp::LoggedWrite write;
        write.sequence = 1;
        write.id = "d";
        const size_t terms = input.empty() ? 0 : static_cast<uint8_t>(input[0]) % 8;
        for (size_t t = 0; t < terms; ++t) write.terms.emplace_back("t" + std::to_string(t), 1);
        for (size_t i = 1; i + 1 < input.size(); ++i) write.tokens.push_back(static_cast<uint8_t>(input[i]) % 10);
        write.length = static_cast<uint32_t>(write.tokens.size()) + (input.size() % 5 == 0 ? 1 : 0);
        // Without words in order (an older indexer's write) there is no title's share to send.
        write.title_tokens = input.empty() || write.tokens.empty() ? 0 : static_cast<uint8_t>(input.back()) % 12;
        const bool expected = applicable(write);
        bool decoded = true;
        try {
          check(warp::transfer::decode_logged_write(warp::transfer::encode_logged_write(write)));
        } catch (const warp::Error&) {
          decoded = false;
        }
        if (decoded != expected) std::abort();
        break;
      }
    }
  } catch (const std::exception&) {  // refused (an Error, or Cap'n Proto's): the leaf logs it and asks again
  }
  return 0;
}
