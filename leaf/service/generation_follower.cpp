#include "leaf/service/generation_follower.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <prometheus/counter.h>

#include "common/transfer/fetcher.hpp"

namespace warp {
namespace {

// What a refused announcement is remembered by: the digest of its signature and manifest (32
// bytes, not the up to 64 MiB of the manifest itself, 64 of them kept).
std::string refusal_key(const transfer::Announcement& announcement) {
  return transfer::sha256_of(announcement.signature + announcement.manifest);
}

}  // namespace

GenerationFollower::GenerationFollower(FollowOptions options, LeafServer& server, prometheus::Registry& registry)
    : options_(std::move(options)),
      server_(server),
      refused_(prometheus::BuildCounter()
                   .Name("warpsearch_leaf_generations_refused_total")
                   .Help("Announced generations refused, by reason: unsigned, signature, malformed, too_large, "
                         "generation_step, no_space, digest")
                   .Register(registry)) {
  for (const transfer::RefusalReason reason : transfer::kAllRefusalReasons)
    refused_.Add({{"reason", transfer::refusal_label(reason)}});
  thread_ = std::thread([this] { run(); });
}

GenerationFollower::~GenerationFollower() {
  stop_ = true;
  thread_.join();
}

void GenerationFollower::run() {
  transfer::GenerationSubscriber subscriber(options_.publish_endpoint, options_.curve);
  while (!stop_) {
    const auto announcement = subscriber.next(std::chrono::milliseconds(500));
    server_.expire_previous();  // where no broker's status request does
    if (!announcement) continue;
    // Not held past this check: take() may wait for the generation served to be released.
    if (const auto current = server_.index(); current && current->generation >= announcement->generation) continue;
    if (const auto refused = refused_until_.find(refusal_key(*announcement));
        refused != refused_until_.end() && std::chrono::steady_clock::now() < refused->second)
      continue;
    try {
      follow(*announcement);
    } catch (const transfer::GenerationRefused& refusal) {
      refuse(*announcement, refusal);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-leaf: generation %llu not taken: %s\n",
                   static_cast<unsigned long long>(announcement->generation), e.what());
    }
  }
}

void GenerationFollower::follow(const transfer::Announcement& announcement) {
  const transfer::GenerationManifest manifest = transfer::open_announcement(announcement, options_.manifest_limits);
  // Only its number: the generation served is not held across take(), which may wait for it to go.
  std::shared_ptr<const LoadedIndex> current = server_.index();
  const uint64_t previous = current ? current->generation : 0;
  const bool serving = current != nullptr;
  current.reset();
  if (serving && manifest.generation - previous > options_.max_generation_step) {
    throw transfer::GenerationRefused(transfer::RefusalReason::kGenerationStep,
                                      "generation " + std::to_string(manifest.generation) + " is more than " +
                                          std::to_string(options_.max_generation_step) + " beyond the one served (" +
                                          std::to_string(previous) + ")");
  }
  transfer::FetchStats stats;
  transfer::FetchOptions fetch;
  fetch.partitions = options_.partitions;  // a leaf fetches only the partitions it serves
  fetch.curve = options_.curve;
  const std::string dir = transfer::fetch_generation(manifest, options_.root, fetch, stats);
  take(dir, manifest.generation);
  std::fprintf(stderr, "warp-leaf: now serving generation %llu (fetched %.1f MB, %llu retries)\n",
               static_cast<unsigned long long>(manifest.generation), stats.bytes / 1e6,
               static_cast<unsigned long long>(stats.retries));
  // The one served and the one before it (a rollback needs no fetch); older ones go.
  transfer::prune_generations(options_.root, {manifest.generation, previous});
}

void GenerationFollower::refuse(const transfer::Announcement& announcement,
                                const transfer::GenerationRefused& refusal) {
  refused_.Add({{"reason", transfer::refusal_label(refusal.reason())}}).Increment();
  std::fprintf(stderr, "warp-leaf: generation %llu refused (%s): %s; serving generation %llu still\n",
               static_cast<unsigned long long>(announcement.generation), transfer::refusal_label(refusal.reason()),
               refusal.what(), static_cast<unsigned long long>(server_.index() ? server_.index()->generation : 0));
  std::string key = refusal_key(announcement);
  const auto until = refusal.reason() == transfer::RefusalReason::kNoSpace
                         ? std::chrono::steady_clock::now() + std::chrono::minutes(1)
                         : std::chrono::steady_clock::time_point::max();
  if (refused_until_.insert_or_assign(key, until).second) refused_order_.push_back(std::move(key));
  if (refused_order_.size() > 64) {
    refused_until_.erase(refused_order_.front());
    refused_order_.pop_front();
  }
}

void GenerationFollower::take(const std::string& dir, uint64_t generation) {
  std::shared_ptr<const LoadedIndex> current = server_.base_index();  // the generation, not writes over it
  const bool gpu_held = options_.processor == "auto" && current && !current->gpu.empty();
  const bool beside = !gpu_held || options_.gpu_generations > 1;
  auto loaded = load_index(dir, options_.partitions, beside ? options_.processor : "cpu", options_.gpu);
  if (!gpu_held || (beside && loaded->gpu_error.empty())) {
    stage(std::move(loaded), true);
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
  stage(std::move(loaded), /*count_gpu_error=*/false);
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

void GenerationFollower::stage(std::shared_ptr<const LoadedIndex> loaded, bool count_gpu_error) {
  const uint64_t generation = loaded->generation;
  server_.stage_index(std::move(loaded), count_gpu_error);
  const auto until = std::chrono::steady_clock::now() + options_.swap_wait;
  while (server_.staged_generation() == generation) {
    if (stop_) return;
    if (std::chrono::steady_clock::now() >= until) {
      if (server_.promote_staged())
        std::fprintf(stderr, "warp-leaf: generation %llu served after %lld ms without a broker reading it\n",
                     static_cast<unsigned long long>(generation), static_cast<long long>(options_.swap_wait.count()));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace warp
