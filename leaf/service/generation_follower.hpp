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
};

class GenerationFollower {
 public:
  GenerationFollower(FollowOptions options, LeafServer& server);
  ~GenerationFollower();

 private:
  void run();
  FollowOptions options_;
  LeafServer& server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warp
