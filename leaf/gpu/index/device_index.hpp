// A partition's index in GPU memory: posting lists, document length norms and, for pfor-ding lists,
// their list-wide exception arrays decoded at upload (Ding et al. decode these small arrays before a
// list's blocks; doing it once trades their raw size for no per-query work). Never managed memory.
//
// Two residencies, chosen by the memory budget for posting lists:
// - all resident (budget 0 or at least the partition's lists): the posting-list arena is copied
//   once into one cudaMalloc;
// - list cache (a smaller budget; Ding et al. §5, the GPU's own index cache): lists are copied on
//   demand, by term, into a stream-ordered memory pool, and the least recently used lists that no
//   query holds are evicted to stay within the budget. The host arena is pinned, so a miss is an
//   async copy on the querying stream that overlaps other streams' kernels; a query on another
//   stream that hits a list still in flight waits for its copy event.
// Norms and exception arrays are always resident. Lexicon and block metadata lookups stay on the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index/index_view.hpp"
#include "leaf/query/live_overlay.hpp"
#include "leaf/gpu/device/device_list.hpp"

namespace warp::gpu {

struct DeviceIndexOptions {
  size_t memory_budget = 0;  // bytes of posting lists; 0: no limit
};

struct ListCacheStats {
  bool caching = false;       // false: every list resident
  size_t bytes_resident = 0;  // lists, norms and exception arrays on the GPU now
  size_t list_bytes_resident = 0;
  size_t slice_bytes = 0;  // docID-range maxima of the long lists (all-resident index only)
  size_t budget = 0;
  uint64_t hits = 0, misses = 0, evictions = 0, bytes_copied = 0;
};

class DeviceIndex {
 public:
  // The lists a query holds; released together when the query's stream has finished with them.
  struct Pins {
    std::vector<void*> entries;
  };

  DeviceIndex(const IndexView& index, DeviceIndexOptions options = {});  // throws Error on CUDA failure
  ~DeviceIndex();
  DeviceIndex(const DeviceIndex&) = delete;
  DeviceIndex& operator=(const DeviceIndex&) = delete;

  const IndexView& host() const { return index_; }
  // The device descriptor of `term`'s list, made resident for work on `stream` and held in `pins`
  // until release(pins); false when the partition does not hold the term.
  bool acquire(const std::string& term, DeviceList& list, const TermInfo** info, cudaStream_t stream, Pins& pins) const;
  void release(Pins& pins) const;
  // For tests and tools on an all-resident index (throws Error in list-cache mode).
  bool find(const std::string& term, DeviceList& list, const TermInfo** info = nullptr) const;

  const float* length_norms() const { return norms_; }
  // The length norms of `live` (the near-real-time overlay: today's statistics) on the device,
  // where a document replaced or deleted since has an infinite norm: it scores 0 for every term,
  // and no top k or AND count takes a document scoring 0. Copied at the overlay's first query (4
  // bytes a document; the lists are never uploaded again) and kept for the two newest overlays;
  // the buffer is held as long as the pointer returned, then reused.
  std::shared_ptr<const float> overlay_norms(const LiveOverlay& live, cudaStream_t stream) const;
  ListCacheStats stats() const;
  uint32_t max_list_slots() const { return max_list_slots_; }  // blocks × block size of the longest list
  uint32_t max_list_blocks() const { return max_list_blocks_; }
  uint32_t block_size() const { return block_size_; }  // values per block of the lists' codec

 private:
  struct ExceptionOffsets {
    uint64_t doc_positions, doc_high, freq_positions, freq_high;
  };
  struct CachedList {
    std::string term;
    uint32_t* words = nullptr;  // the list's blob (and read padding) on the GPU
    size_t bytes = 0;
    uint32_t pins = 0;
    cudaEvent_t ready = nullptr;  // recorded after the copy
    std::list<CachedList*>::iterator lru;
  };
  void describe(const std::string& term, const TermInfo& info, const uint32_t* device_list_words,
                DeviceList& list) const;
  void evict_for(size_t bytes, cudaStream_t stream) const;  // mutex_ held
  void build_slice_maxima(size_t budget);
  void free_device();

  const IndexView& index_;
  DeviceIndexOptions options_;
  bool caching_ = false;
  bool host_registered_ = false;
  uint32_t* postings_ = nullptr;    // all-resident copy of index.postings
  float* norms_ = nullptr;          // copy of index.length_norms
  uint32_t* exceptions_ = nullptr;  // pfor-ding exception positions and high bits
  std::unordered_map<std::string, ExceptionOffsets> exception_offsets_;
  uint8_t* slice_maxima_ = nullptr;  // kSliceDocs-document maxima of the long lists, one byte each
  uint32_t* tile_blocks_ = nullptr;  // the long lists' first block per tile
  std::unordered_map<std::string, size_t> slice_offsets_;  // index of the list among the long lists
  size_t fixed_bytes_ = 0;
  uint32_t max_list_slots_ = 0;
  uint32_t max_list_blocks_ = 0;
  uint32_t block_size_ = 128;

  // overlay_norms(): buffers of norm_count_ floats (all freed with the index; those neither a query
  // nor the cache holds are free to reuse), and the cache, newest first. In this order: the cache
  // goes first, handing its buffers back.
  size_t norm_count_ = 1;
  mutable std::mutex overlay_mutex_;
  mutable std::vector<float*> overlay_buffers_, overlay_free_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const float>>> overlay_cache_;

  cudaMemPool_t pool_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, CachedList> cache_;
  mutable std::list<CachedList*> lru_;  // most recent first
  mutable ListCacheStats stats_;
};

}  // namespace warp::gpu
