// One write through the API as leaves apply it between generations (the near-real-time path,
// docs/writes.md): the op, the document analyzed as a build would analyze it, and the collection's
// BM25 statistics after it. The indexer computes them over the whole collection in log order
// (indexer/writes/collection_state.hpp), so every leaf scores with the same N, total length and
// document frequencies at every point, whichever partitions it holds.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace warp {

struct LoggedWrite {
  enum class Kind : uint8_t { kPut = 1, kDelete = 2 };
  uint64_t sequence = 0;
  Kind kind = Kind::kPut;
  std::string id;
  std::string title, url;  // kPut
  std::string source;      // kPut: the document as written, its stored form (stored_source.hpp)
  std::vector<std::pair<std::string, uint32_t>> terms{};  // kPut: distinct terms and frequencies
  uint32_t length = 0;                                    // kPut: analyzed terms
  // kPut: the analyzed words in order, each as its index in `terms`: the title's first
  // (`title_tokens` of them), then the body's. The leaves' word positions are made of them, not of
  // the source analyzed again. Empty from an indexer that does not send them.
  std::vector<uint32_t> tokens{};
  uint32_t title_tokens = 0;
  uint64_t doc_count = 0, total_length = 0;  // the collection after this op
  // The df after this op of every term it changed and of every term of a put's document.
  std::vector<std::pair<std::string, uint64_t>> df{};
  uint64_t logged_unix_ns = 0;  // when the indexer had it durable (0: not known)
};

// The partition a document written through the API is searched in until a generation holds it:
// FNV-1a of its id, modulo the generation's partitions (every replica and leaf computes the same).
uint32_t live_partition_of(const std::string& id, uint32_t partition_count);

}  // namespace warp
