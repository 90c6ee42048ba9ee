// libFuzzer: FetchRequest frames as the indexer's file socket answers them, with one generation
// published. The first byte chooses raw bytes or a well-formed request whose path, offset, length
// and generation come from the input (path tricks such as "../" included). An answer must parse,
// and no byte outside the announced files may be served.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdlib>
#include <filesystem>

#include "common/index/index_files.hpp"
#include "common/protocol/publish.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "indexer/publisher.hpp"

namespace {

warp::Publisher* make_publisher() {
  const auto root = std::filesystem::temp_directory_path() / ("warp-fuzz-publisher-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  warp::IndexBuilder builder(warp::BuildOptions{});
  for (int i = 0; i < 50; ++i)
    builder.add_document({"d" + std::to_string(i), "", "some text " + std::to_string(i), ""});
  warp::write_index(builder.build(), (root / "gen-000001").string());
  auto* publisher = new warp::Publisher({root.string(), "tcp://127.0.0.1:*", "tcp://127.0.0.1:*", 0, {}});
  publisher->announce(1);
  return publisher;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static warp::Publisher* publisher = make_publisher();
  if (size == 0) return 0;
  std::string frame;
  if (data[0] % 2 == 0 || size < 6) {
    frame.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    capnp::MallocMessageBuilder builder;
    auto request = builder.initRoot<warp::protocol::FetchRequest>();
    request.setGeneration(data[1] % 3);
    request.setOffset(static_cast<uint64_t>(data[2]) << (data[3] % 40));
    request.setLength(static_cast<uint32_t>(data[4]) << (data[5] % 32));
    request.setPath(std::string(reinterpret_cast<const char*>(data + 6), size - 6));
    const auto words = capnp::messageToFlatArray(builder);
    frame.assign(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
  }
  capnp::MallocMessageBuilder reply;
  publisher->answer_fetch(zmq::message_t(frame.data(), frame.size()), reply);
  const auto response = reply.getRoot<warp::protocol::FetchResponse>().asReader();
  if (response.getError().size() == 0) {  // served: the path must be one announced file
    const std::string path = response.getPath();
    if (path.find("..") != std::string::npos || path.empty() || path.front() == '/') std::abort();
  }
  return 0;
}
