// The leaf's side of publishing: subscribe to generation announcements, and fetch a generation's
// files in checksummed chunks into a temporary directory, verify every chunk and every whole file,
// and move the generation into place with one rename. A corrupt chunk or a lost reply is retried;
// a transfer that still fails leaves nothing behind and throws. A fetched generation directory is
// an index directory (open_index reads it).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/transfer/curve.hpp"
#include "common/transfer/generation_files.hpp"

namespace warp::transfer {

struct Announcement {
  uint64_t generation = 0;
  uint32_t partitions = 0;
  std::vector<GenerationFile> files;
  std::string fetch_endpoint;
};

// Where to fetch an announced generation from. An indexer bound to every interface announces its
// bind address (tcp://0.0.0.0:5602), which names no host another machine can reach: a wildcard
// host (0.0.0.0, *, ::) is replaced by the host of the announcement endpoint the leaf subscribed
// to (tcp://indexer:5601 gives tcp://indexer:5602). Any other endpoint is returned unchanged.
std::string reachable_fetch_endpoint(const std::string& announced, const std::string& publish_endpoint);

class GenerationSubscriber {
 public:
  // `curve` enabled: a CURVE client of the indexer (DIR/indexer.pub) with the leaf's pair.
  explicit GenerationSubscriber(const std::string& publish_endpoint, const CurveConfig& curve = {});
  ~GenerationSubscriber();
  // The next announcement (its fetch endpoint made reachable: reachable_fetch_endpoint), or
  // nothing after `timeout`. Malformed messages are skipped.
  std::optional<Announcement> next(std::chrono::milliseconds timeout);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct FetchOptions {
  std::vector<uint32_t> partitions;  // only the files of these partitions (part-NNNN/); empty: all
  uint32_t chunk_bytes = 1u << 20;
  int max_attempts = 5;  // per chunk, and per whole file
  std::chrono::milliseconds reply_timeout{5000};
  CurveConfig curve;  // enabled: the file socket is a CURVE client of the indexer
};

struct FetchStats {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t retries = 0;  // chunks requested again after a checksum mismatch, an error or a timeout
};

// Fetches `announcement` into `root`/gen-NNNNNN (returned). Idempotent: an existing complete
// generation directory is returned as is. Throws Error when the transfer cannot be completed.
std::string fetch_generation(const Announcement& announcement, const std::string& root, const FetchOptions& options,
                             FetchStats& stats);

}  // namespace warp::transfer
