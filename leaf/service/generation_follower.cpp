#include "leaf/service/generation_follower.hpp"

#include <chrono>
#include <cstdio>
#include <memory>

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
    // Not held past this check: take() may wait for the generation served to be released.
    if (const auto current = server_.index(); current && current->generation >= announcement->generation) continue;
    try {
      transfer::FetchStats stats;
      transfer::FetchOptions fetch;
      fetch.partitions = options_.partitions;  // a leaf fetches only the partitions it serves
      fetch.curve = options_.curve;
      const std::string dir = transfer::fetch_generation(*announcement, options_.root, fetch, stats);
      take(dir, announcement->generation);
      std::fprintf(stderr, "warp-leaf: now serving generation %llu (fetched %.1f MB, %llu retries)\n",
                   static_cast<unsigned long long>(announcement->generation), stats.bytes / 1e6,
                   static_cast<unsigned long long>(stats.retries));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-leaf: generation %llu not taken: %s\n",
                   static_cast<unsigned long long>(announcement->generation), e.what());
    }
  }
}

void GenerationFollower::take(const std::string& dir, uint64_t generation) {
  std::shared_ptr<const LoadedIndex> current = server_.index();
  const bool gpu_held = options_.processor == "auto" && current && !current->gpu.empty();
  const bool beside = !gpu_held || options_.gpu_generations > 1;
  auto loaded = load_index(dir, options_.partitions, beside ? options_.processor : "cpu", options_.gpu);
  if (!gpu_held || (beside && loaded->gpu_error.empty())) {
    server_.swap_index(std::move(loaded));
    return;
  }
  // The GPU holds the generation served (a GPU large enough for one generation's lists and
  // buffers, not two): the new one serves on the CPU while the old one's queries finish and free
  // the GPU's memory, then the GPU's processors are made for it (with_gpu: its partitions and CPU
  // processors kept, not opened again).
  std::fprintf(stderr, "warp-leaf: generation %llu on the CPU until generation %llu frees the GPU%s\n",
               static_cast<unsigned long long>(generation), static_cast<unsigned long long>(current->generation),
               beside ? (" (" + loaded->gpu_error + ")").c_str() : "");
  const std::weak_ptr<const LoadedIndex> old = current;
  const uint64_t old_generation = current->generation;
  current.reset();
  const std::shared_ptr<const LoadedIndex> on_cpu = loaded;  // its partitions go on to the GPU's
  server_.swap_index(std::move(loaded), /*count_gpu_error=*/false);
  // Queries end at their deadlines: a few seconds at most, unless one is stuck on the GPU.
  for (int waited = 0; !old.expired() && waited < 300; ++waited) {
    if (stop_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!old.expired()) {
    std::fprintf(stderr, "warp-leaf: generation %llu still holds the GPU after 30 s; generation %llu loads beside it\n",
                 static_cast<unsigned long long>(old_generation), static_cast<unsigned long long>(generation));
  }
  // The same partitions and CPU processors, with the GPU's: not opened and checked a second time.
  server_.swap_index(with_gpu(on_cpu, options_.gpu));
}

}  // namespace warp
