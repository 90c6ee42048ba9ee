// The GPU query processor of one partition, the twin of CpuQueryProcessor over the same IndexView
// (uploaded once into a DeviceIndex) with the same answers:
// - AND (Ding et al. 2009 §8.1–8.2): the shortest list decoded whole gives the candidates; for each
//   longer list, a merge of the candidates against its per-block last docIDs selects the only blocks
//   to decode; candidates are probed in them and BM25 accumulated term at a time.
// - OR (§8.3): every block of every list decoded and scored into dense per-document accumulators.
// - AND+OR: AND, then OR when AND finds fewer than k.
// - Top-k: keys (score, docID) sorted by a device radix sort; the k best are copied back.
// Query memory comes from buffers allocated once at construction, never per query. One query at a
// time per processor (a mutex); the batched path is later work.
#pragma once
#include <memory>
#include <mutex>

#include "leaf/gpu/device_index.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp::gpu {

class GpuQueryProcessor final : public QueryProcessor {
 public:
  explicit GpuQueryProcessor(const IndexView& index);
  ~GpuQueryProcessor() override;
  std::string_view name() const override { return "gpu"; }
  QueryResult search(const Query& query) const override;
  const DeviceIndex& device_index() const { return device_; }

 private:
  struct Buffers;
  QueryResult search_and(const std::vector<std::string>& terms, size_t k) const;
  QueryResult search_or(const std::vector<std::string>& terms, size_t k) const;

  DeviceIndex device_;
  std::unique_ptr<Buffers> buffers_;
  mutable std::mutex mutex_;
};

}  // namespace warp::gpu
