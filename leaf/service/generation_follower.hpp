// Keeps a leaf on the indexer's latest generation: subscribes to announcements, fetches a newer
// generation (verified, placed atomically), loads the leaf's partitions of it and hot-swaps them
// in. A failed fetch or load is logged and tried again at the next announcement; the leaf goes on
// serving what it has.
#pragma once
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "leaf/service/leaf_server.hpp"

namespace warp {

struct FollowOptions {
  std::string publish_endpoint;  // the indexer's PUB endpoint
  std::string root;              // where fetched generations are kept
  std::vector<uint32_t> partitions;
  std::string processor = "cpu";
  gpu::GpuSettings gpu;
  transfer::CurveConfig curve;  // enabled: announcements and files over CURVE (DIR/indexer.pub)
  // --processor auto: generations whose GPU processors may exist at once. 2: a new generation is
  // loaded on the GPU beside the one served; 1: the one served gives the GPU up first. Either way, a
  // new generation the GPU cannot take beside the old one is served on the CPU until the old one's
  // last query is answered, then loaded again with the GPU.
  size_t gpu_generations = 2;
};

class GenerationFollower {
 public:
  GenerationFollower(FollowOptions options, LeafServer& server);
  ~GenerationFollower();

 private:
  void run();
  // Serves the generation in `dir` (announced as `generation`): loaded and swapped in, by way of
  // the CPU where the GPU must first be freed by the generation served now.
  void take(const std::string& dir, uint64_t generation);
  FollowOptions options_;
  LeafServer& server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warp
