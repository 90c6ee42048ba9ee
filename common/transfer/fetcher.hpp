// The leaf's side of publishing: subscribe to generation announcements, open an announcement's
// signed manifest (generation_manifest.hpp), and fetch the generation's files in CRC-checked chunks
// into a temporary directory, check every whole file against its SHA-256 in the manifest, and move
// the generation into place with one rename. A corrupt chunk or a lost reply is retried; a transfer
// that still fails leaves nothing behind and throws. A fetched generation directory is an index
// directory (open_index reads it), kept beside the manifest it was checked against
// (gen-NNNNNN.manifest).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/transfer/curve.hpp"
#include "common/transfer/generation_manifest.hpp"

namespace warp::transfer {

// An announcement as heard, not yet checked: open_announcement gives what it vouches for.
struct Announcement {
  uint64_t generation = 0;       // as the announcement says (only to skip generations already served)
  std::string manifest;          // GenerationManifest bytes
  std::string signature;         // their Ed25519 signature, or empty
  std::string publish_endpoint;  // where it was heard (reachable_fetch_endpoint)
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
  // The next announcement, or nothing after `timeout`. Messages that are not announcements, or
  // larger than 80 MiB, are dropped.
  std::optional<Announcement> next(std::chrono::milliseconds timeout);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The manifest of `announcement` (open_manifest: signature, limits), its fetch endpoint made
// reachable. Throws GenerationRefused, also where the announcement's generation is not the
// manifest's.
GenerationManifest open_announcement(const Announcement& announcement, const ManifestLimits& limits);

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

// Fetches the generation of `manifest` (open_announcement's) into `root`/gen-NNNNNN (returned).
// Idempotent: a complete generation directory fetched for the same manifest is returned as is; one
// fetched for another manifest of that number is replaced. Throws GenerationRefused when the files
// wanted do not fit the free space of `root`'s file system, or a file's content does not match its
// digest after max_attempts; Error when the transfer cannot be completed.
std::string fetch_generation(const GenerationManifest& manifest, const std::string& root, const FetchOptions& options,
                             FetchStats& stats);

// Removes from `root` every generation directory (and its manifest) but those of `keep`.
void prune_generations(const std::string& root, const std::vector<uint64_t>& keep);

}  // namespace warp::transfer
