// Keeps a leaf on the indexer's latest generation: subscribes to announcements, opens a newer
// generation's signed manifest, fetches its files (each checked against its SHA-256, the whole
// placed atomically), loads the leaf's partitions of it and hot-swaps them in, then removes every
// generation but the one served and the one before it. A new generation is staged beside the one
// served until the brokers read it, so that the leaves of every partition swap together as the
// brokers see them (docs/writes.md, "Generations swapped together"). A generation refused (a manifest that is not
// signed by the indexer's key, malformed, over the limits, too far ahead, not fitting the disk, or
// a file that does not match its digest) is logged once, counted in
// warpsearch_leaf_generations_refused_total{reason} and not tried again; a failed fetch or load is
// logged and tried again at the next announcement. Either way the leaf goes on serving what it has.
#pragma once
#include <atomic>
#include <deque>
#include <memory>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/transfer/fetcher.hpp"
#include "common/transfer/generation_manifest.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

struct FollowOptions {
  std::string publish_endpoint{};  // the indexer's PUB endpoint
  std::string root{};              // where fetched generations are kept
  std::vector<uint32_t> partitions{};
  std::string processor = "cpu";
  gpu::GpuSettings gpu{};
  transfer::CurveConfig curve{};  // enabled: announcements and files over CURVE (DIR/indexer.pub)
  // --processor auto: generations whose GPU processors may exist at once. 2: a new generation is
  // loaded on the GPU beside the one served; 1: the one served gives the GPU up first. Either way, a
  // new generation the GPU cannot take beside the old one is served on the CPU until the old one's
  // last query is answered, then loaded again with the GPU.
  size_t gpu_generations = 2;
  // The manifest's checks: the indexer's public signing key (empty: unsigned generations taken,
  // --unsigned-generations) and the limits on files, bytes and generation numbers.
  transfer::ManifestLimits manifest_limits{};
  // A generation more than this beyond the one served is refused.
  uint64_t max_generation_step = 1000000;
  // A new generation is staged until a broker reads it (LeafServer::stage_index), or served after
  // this long regardless (a leaf no broker reads, a partition whose other leaves never take it).
  std::chrono::milliseconds swap_wait{10000};
};

class GenerationFollower {
 public:
  GenerationFollower(FollowOptions options, LeafServer& server, prometheus::Registry& registry);
  ~GenerationFollower();

 private:
  void run();
  // Opens, fetches and takes one announcement; GenerationRefused or Error when it is not taken.
  void follow(const transfer::Announcement& announcement);
  void refuse(const transfer::Announcement& announcement, const transfer::GenerationRefused& refusal);
  // Serves the generation in `dir` (announced as `generation`): loaded and swapped in, by way of
  // the CPU where the GPU must first be freed by the generation served now.
  void take(const std::string& dir, uint64_t generation);
  // Stages `loaded` and waits until it is served: promoted by a broker, or by swap_wait.
  void stage(std::shared_ptr<const LoadedIndex> loaded, bool count_gpu_error);
  FollowOptions options_;
  LeafServer& server_;
  prometheus::Family<prometheus::Counter>& refused_;  // {reason}
  // Announcements refused (their signature and manifest), not opened again when re-announced before
  // their time (never, but for a disk that was full: a minute later).
  std::map<std::string, std::chrono::steady_clock::time_point> refused_until_;
  std::deque<std::string> refused_order_;  // the oldest forgotten past 64
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warp
