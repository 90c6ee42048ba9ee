#include "leaf/service/generation_follower.hpp"

#include <cstdio>

#include "common/transfer/fetcher.hpp"

namespace warp {

GenerationFollower::GenerationFollower(FollowOptions options, LeafServer& server)
    : options_(std::move(options)), server_(server), thread_([this] { run(); }) {}

GenerationFollower::~GenerationFollower() {
  stop_ = true;
  thread_.join();
}

void GenerationFollower::run() {
  transfer::GenerationSubscriber subscriber(options_.publish_endpoint, options_.curve);
  while (!stop_) {
    const auto announcement = subscriber.next(std::chrono::milliseconds(500));
    if (!announcement) continue;
    const auto current = server_.index();
    if (current && current->generation >= announcement->generation) continue;
    try {
      transfer::FetchStats stats;
      transfer::FetchOptions fetch;
      fetch.partitions = options_.partitions;  // a leaf fetches only the partitions it serves
      fetch.curve = options_.curve;
      const std::string dir = transfer::fetch_generation(*announcement, options_.root, fetch, stats);
      server_.swap_index(load_index(dir, options_.partitions, options_.processor, options_.gpu));
      std::fprintf(stderr, "warp-leaf: now serving generation %llu (fetched %.1f MB, %llu retries)\n",
                   static_cast<unsigned long long>(announcement->generation), stats.bytes / 1e6,
                   static_cast<unsigned long long>(stats.retries));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-leaf: generation %llu not taken: %s\n",
                   static_cast<unsigned long long>(announcement->generation), e.what());
    }
  }
}

}  // namespace warp
