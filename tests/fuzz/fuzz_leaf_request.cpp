// libFuzzer: LeafRequest frames as a leaf's worker handles them, over a small index. The first
// byte chooses: the raw bytes as the frame (malformed Cap'n Proto), a well-formed search built from
// the rest (terms, counts, mode, k, partition, deadline from the input), reaching the query
// processors, or a documents request (ids, docIDs, terms, snippet settings from the input),
// reaching the stored forms and the snippets. Every answer must be a LeafReply that parses.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdlib>
#include <filesystem>

#include "common/index/index_files.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "leaf/service/leaf_server.hpp"

namespace {

warp::LeafServer* make_leaf() {
  const auto dir = std::filesystem::temp_directory_path() / ("warp-fuzz-leaf-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  warp::BuildOptions options;
  options.partitions = 2;
  warp::IndexBuilder builder(options);
  const char* texts[] = {"boundary layer transition", "shock wave interaction", "supersonic wing flutter",
                         "heat transfer boundary",    "wing boundary wave",     "laminar flow layer"};
  for (int i = 0; i < 600; ++i) builder.add_document({"d" + std::to_string(i), "", texts[i % 6], texts[(i * 7) % 6]});
  warp::write_index(builder.build(), dir.string());
  warp::LeafOptions leaf_options;
  leaf_options.listen = "inproc://warp-fuzz-leaf";
  leaf_options.workers = 1;
  leaf_options.queue_depth = 16;
  auto* leaf = new warp::LeafServer(leaf_options, std::make_shared<prometheus::Registry>());
  leaf->swap_index(warp::load_index(dir.string(), {}, "cpu", {}));
  return leaf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static warp::LeafServer* leaf = make_leaf();
  if (size == 0) return 0;
  std::string frame;
  if (data[0] % 4 == 0) {
    frame.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else if (data[0] % 4 == 2) {  // a documents request: ids and terms from the words, docIDs from the bytes
    capnp::MallocMessageBuilder builder;
    auto documents = builder.initRoot<warp::protocol::LeafRequest>().initDocuments();
    const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    std::vector<std::string> words;
    for (size_t start = 0, end; start < rest.size(); start = end + 1) {
      end = std::min(rest.find(' ', start), rest.size());
      words.push_back(rest.substr(start, end - start));
    }
    const uint8_t shape = size > 1 ? data[1] : 0;
    auto ids = documents.initIds(static_cast<unsigned>(words.size()));
    auto terms = documents.initTerms(static_cast<unsigned>(words.size()));
    for (size_t i = 0; i < words.size(); ++i) {
      ids.set(static_cast<unsigned>(i), words[i]);
      terms.set(static_cast<unsigned>(i), words[i]);
    }
    if (shape & 1) {  // docIDs too, one per id (or one more: refused)
      auto docs = documents.initDocs(static_cast<unsigned>(words.size() + (shape >> 7)));
      for (unsigned i = 0; i < docs.size(); ++i) docs.set(i, i < rest.size() ? static_cast<uint8_t>(rest[i]) * 5u : i);
    }
    documents.setSource(shape & 2);
    documents.setSnippetField(shape & 4 ? "body" : "title");
    documents.setSnippetLength(shape & 8 ? 20000 : (shape >> 2) * 7u);
    documents.setPreTag(shape & 16 ? std::string(300, '<') : "<em>");
    documents.setPartition((shape >> 5) & 3);
    documents.setDeadlineMicros(1000000);
    const auto words_array = capnp::messageToFlatArray(builder);
    frame.assign(reinterpret_cast<const char*>(words_array.asBytes().begin()), words_array.asBytes().size());
  } else {
    capnp::MallocMessageBuilder builder;
    auto search = builder.initRoot<warp::protocol::LeafRequest>().initSearch();
    const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    std::vector<std::string> words;
    for (size_t start = 0, end; start < rest.size(); start = end + 1) {
      end = std::min(rest.find(' ', start), rest.size());
      words.push_back(rest.substr(start, end - start));
    }
    const uint8_t shape = size > 1 ? data[1] : 0;
    auto terms = search.initTerms(static_cast<unsigned>(words.size()));
    for (size_t i = 0; i < words.size(); ++i) terms.set(static_cast<unsigned>(i), words[i]);
    if (shape & 1) {  // counts, sometimes of the wrong length or zero
      auto counts = search.initTermCounts(static_cast<unsigned>(words.size() + (shape >> 7)));
      for (unsigned i = 0; i < counts.size(); ++i) counts.set(i, (shape >> 1) & 3 ? static_cast<uint32_t>(i % 3) : 1u);
    }
    if (shape & 4) {  // the syntax's constraints: the first word required, the others as excluded groups
      auto required = search.initRequired(words.empty() ? 0u : 1u);
      if (!words.empty()) required.set(0, words[0]);
      auto excluded = search.initExcluded(static_cast<unsigned>(words.size() / 2));
      for (unsigned g = 0; g < excluded.size(); ++g) {
        auto group = excluded.init(g, 1 + (g & 1));
        for (unsigned i = 0; i < group.size(); ++i) group.set(i, words[(g * 2 + i + 1) % words.size()]);
      }
    }
    search.setMode(static_cast<warp::protocol::Mode>((shape >> 3) % 4));
    search.setK(shape & 0x40 ? 100000 : static_cast<uint32_t>(shape % 40));
    search.setPartition((shape >> 5) & 3);
    search.setDeadlineMicros(shape & 0x10 ? 0 : 1000000);
    const auto words_array = capnp::messageToFlatArray(builder);
    frame.assign(reinterpret_cast<const char*>(words_array.asBytes().begin()), words_array.asBytes().size());
  }
  const std::string reply = leaf->handle(frame, std::chrono::steady_clock::now());
  zmq::message_t message(reply.data(), reply.size());
  warp::transfer::FrameReader reader(message);  // throws (abort) if the leaf wrote garbage
  (void)reader.root<warp::protocol::LeafReply>().which();
  return 0;
}
