#include "leaf/gpu/gpu_replicas.hpp"

#include <algorithm>

#include "common/util/status.hpp"

namespace warp::gpu {

ReplicatedGpuProcessor::ReplicatedGpuProcessor(const IndexView& index, const std::vector<int>& devices,
                                               const GpuProcessorOptions& options)
    : in_flight_(std::make_unique<std::atomic<size_t>[]>(std::max<size_t>(1, devices.size()))),
      answered_(std::make_unique<std::atomic<uint64_t>[]>(std::max<size_t>(1, devices.size()))) {
  if (devices.empty()) throw Error("a replicated GPU processor needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    GpuProcessorOptions on_device = options;
    on_device.device = devices[i];
    replicas_.push_back(std::make_unique<GpuQueryProcessor>(index, on_device));
    in_flight_[i] = 0, answered_[i] = 0;
  }
}

size_t ReplicatedGpuProcessor::pick(size_t queries) const {
  const size_t n = replicas_.size(), first = turn_.fetch_add(1, std::memory_order_relaxed) % n;
  size_t best = first;
  for (size_t j = 1; j < n; ++j) {
    const size_t i = (first + j) % n;
    if (in_flight_[i].load(std::memory_order_relaxed) < in_flight_[best].load(std::memory_order_relaxed)) best = i;
  }
  in_flight_[best].fetch_add(queries, std::memory_order_relaxed);
  return best;
}

namespace {
struct Landed {  // lowers the replica's in-flight count and counts its answers, however the search ends
  std::atomic<size_t>& in_flight;
  std::atomic<uint64_t>& answered;
  size_t queries;
  ~Landed() {
    in_flight.fetch_sub(queries, std::memory_order_relaxed);
    answered.fetch_add(queries, std::memory_order_relaxed);
  }
};
}  // namespace

QueryResult ReplicatedGpuProcessor::search(const PreparedQuery& query) const {
  const size_t i = pick(1);
  Landed landed{in_flight_[i], answered_[i], 1};
  return replicas_[i]->search(query);
}

std::vector<QueryResult> ReplicatedGpuProcessor::search_batch(std::span<const PreparedQuery> queries) const {
  const size_t i = pick(queries.size());
  Landed landed{in_flight_[i], answered_[i], queries.size()};
  return replicas_[i]->search_batch(queries);
}

namespace {
// A replica's run that keeps the replica's in-flight count raised until it ends.
class ReplicaRun final : public BatchRun {
 public:
  ReplicaRun(std::unique_ptr<BatchRun> run, std::atomic<size_t>& in_flight, std::atomic<uint64_t>& answered,
             size_t queries)
      : run_(std::move(run)), landed_{in_flight, answered, queries} {}
  bool poll() override { return run_->poll(); }
  std::vector<QueryResult> take() override { return run_->take(); }
  double between_phases_seconds() const override { return run_->between_phases_seconds(); }

 private:
  std::unique_ptr<BatchRun> run_;
  Landed landed_;
};
}  // namespace

std::unique_ptr<BatchRun> ReplicatedGpuProcessor::start_batch(std::span<const PreparedQuery> queries) const {
  const size_t i = pick(queries.size());
  std::unique_ptr<BatchRun> run;
  try {
    run = replicas_[i]->start_batch(queries);
  } catch (...) {
    Landed landed{in_flight_[i], answered_[i], queries.size()};
    throw;
  }
  return std::make_unique<ReplicaRun>(std::move(run), in_flight_[i], answered_[i], queries.size());
}

DeviceMemoryStats ReplicatedGpuProcessor::device_memory() const {
  DeviceMemoryStats total;
  for (const auto& replica : replicas_) {
    const DeviceMemoryStats s = replica->device_memory();
    total.bytes_resident += s.bytes_resident;
    total.list_cache_hits += s.list_cache_hits;
    total.list_cache_misses += s.list_cache_misses;
    total.list_cache_evictions += s.list_cache_evictions;
  }
  return total;
}

std::vector<uint64_t> ReplicatedGpuProcessor::answered() const {
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < replicas_.size(); ++i) counts.push_back(answered_[i].load());
  return counts;
}

std::vector<int> devices_of_partition(uint32_t partition, const std::vector<int>& devices, size_t replicas) {
  if (devices.empty()) return {0};
  const size_t count = std::clamp<size_t>(replicas, 1, devices.size());
  std::vector<int> chosen;
  for (size_t i = 0; i < count; ++i) chosen.push_back(devices[(partition + i) % devices.size()]);
  return chosen;
}

}  // namespace warp::gpu
