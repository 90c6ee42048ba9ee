// The indexer's publishing side: announces complete generations on a ZeroMQ PUB socket (and
// re-announces the latest every second, so a leaf that connects late still learns of it) and
// serves the generations' files in CRC-checked chunks on a ZeroMQ ROUTER socket (Cap'n Proto
// messages, common/protocol/publish.capnp). Only files of announced generations are served. Each
// announcement carries the generation's manifest (every file's size and SHA-256), signed with the
// indexer's signing key (common/transfer/generation_manifest.hpp).
#pragma once
#include "common/transfer/curve.hpp"
#include <capnp/message.h>
#include <zmq.hpp>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/transfer/generation_manifest.hpp"

namespace warp {

struct PublisherOptions {
  std::string root{};              // holds gen-NNNNNN directories
  std::string publish_endpoint{};  // e.g. tcp://127.0.0.1:5601 ("*" for the port: any free one)
  std::string fetch_endpoint{};    // e.g. tcp://127.0.0.1:5602
  int corrupt_replies = 0;         // tests only: flip a byte in this many replies (fault injection)
  transfer::CurveConfig curve{};   // enabled: both sockets CURVE servers, leaves from the allow-list only
  std::string signing_key{};       // Ed25519 secret key (64 bytes) the manifests are signed with; empty: unsigned
};

struct PublisherCounters {
  std::atomic<uint64_t> announcements{0};
  std::atomic<uint64_t> fetch_requests{0};
  std::atomic<uint64_t> bytes_served{0};
  std::atomic<uint64_t> bad_requests{0};
};

class Publisher {
 public:
  explicit Publisher(PublisherOptions options);  // binds both sockets; throws Error on failure
  ~Publisher();                                  // stops the serving thread
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Lists and checksums root/gen-N (complete: it was renamed into place), signs its manifest and
  // announces it.
  void announce(uint64_t generation);
  // Stops serving the files of `generation` (before its directory is removed). Not the latest.
  void forget(uint64_t generation);
  const std::string& publish_endpoint() const { return publish_endpoint_; }  // as bound
  const std::string& fetch_endpoint() const { return fetch_endpoint_; }
  const PublisherCounters& counters() const { return counters_; }

  // The answer to one FetchRequest frame, as the file socket sends it (public for the fuzzer).
  void answer_fetch(const zmq::message_t& request, capnp::MallocMessageBuilder& reply);

 private:
  void serve();

  PublisherOptions options_;
  std::string publish_endpoint_, fetch_endpoint_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
  std::mutex mutex_;
  std::map<uint64_t, transfer::SignedManifest> generations_;  // announced
  uint64_t latest_ = 0;
  bool announce_now_ = false;
  std::atomic<bool> stop_{false};
  PublisherCounters counters_;
  std::thread thread_;
};

}  // namespace warp
