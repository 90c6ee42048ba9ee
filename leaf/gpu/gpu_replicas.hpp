// A partition's GPU processor on several devices: a replica of the partition's index, lanes and
// batch executors on each, every search sent to the replica with the fewest queries in flight
// (ties in turn), so that one hot partition keeps several GPUs busy. The replicas give identical
// answers (each is a GpuQueryProcessor, checked against the CPU).
#pragma once
#include <atomic>
#include <memory>
#include <vector>

#include "leaf/gpu/gpu_query_processor.hpp"

namespace warp::gpu {

class ReplicatedGpuProcessor final : public QueryProcessor {
 public:
  // One replica per entry of `devices` (a device may repeat: two replicas on one GPU).
  ReplicatedGpuProcessor(const IndexView& index, const std::vector<int>& devices, const GpuProcessorOptions& options);
  std::string_view name() const override { return "gpu"; }
  const IndexView& index() const override { return replicas_[0]->index(); }
  using QueryProcessor::search;
  using QueryProcessor::search_batch;
  QueryResult search(const PreparedQuery& query) const override;
  std::vector<QueryResult> search_batch(std::span<const PreparedQuery> queries) const override;
  std::unique_ptr<BatchRun> start_batch(std::span<const PreparedQuery> queries) const override;
  DeviceMemoryStats device_memory() const override;
  // Queries each replica has answered so far.
  std::vector<uint64_t> answered() const;

 private:
  size_t pick(size_t queries) const;  // the replica to use, its in-flight count raised by `queries`

  std::vector<std::unique_ptr<GpuQueryProcessor>> replicas_;
  mutable std::unique_ptr<std::atomic<size_t>[]> in_flight_;
  mutable std::unique_ptr<std::atomic<uint64_t>[]> answered_;
  mutable std::atomic<size_t> turn_{0};
};

// The devices of partition `partition` among `devices`: `replicas` of them (at most all), from
// devices[partition % devices.size()] on in turn; partitions spread over the devices.
std::vector<int> devices_of_partition(uint32_t partition, const std::vector<int>& devices, size_t replicas);

}  // namespace warp::gpu
