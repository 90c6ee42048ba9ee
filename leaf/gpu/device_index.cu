#include "leaf/gpu/device_index.hpp"

#include <vector>

#include "common/codec/codec.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/cuda_check.cuh"

namespace warp::gpu {

DeviceIndex::DeviceIndex(const IndexView& index, DeviceIndexOptions options) : index_(index), options_(options) {
  std::vector<uint32_t> exceptions;
  for (const auto& [term, info] : index.lexicon) {
    const PostingListView list = index.list(term, info);
    max_list_blocks_ = std::max(max_list_blocks_, list.block_count);
    max_list_slots_ = std::max(max_list_slots_, list.block_count * list.codec->block_size());
    if (list.codec->id() != CodecId::kPforDing) continue;
    ExceptionOffsets offsets{};
    uint64_t* slots[2][2] = {{&offsets.doc_positions, &offsets.doc_high}, {&offsets.freq_positions, &offsets.freq_high}};
    int which = 0;
    for (const EncodedView* seq : {&list.docs, &list.freqs}) {
      const PforDingExceptions e = pfor_ding_exceptions(*seq);
      *slots[which][0] = exceptions.size();
      exceptions.insert(exceptions.end(), e.positions.begin(), e.positions.end());
      *slots[which][1] = exceptions.size();
      exceptions.insert(exceptions.end(), e.high_bits.begin(), e.high_bits.end());
      ++which;
    }
    exception_offsets_.emplace(term, offsets);
  }
  exceptions.push_back(0);  // never an empty allocation
  const size_t postings_bytes = index.postings.size() * sizeof(uint32_t);
  caching_ = options.memory_budget > 0 && postings_bytes > options.memory_budget;
  try {
    if (caching_) {
      // Pinned host lists: misses are true async copies. A view pinned already (another processor
      // over the same partition) is used as it is.
      const cudaError_t pinned = cudaHostRegister(const_cast<uint32_t*>(index.postings.data()), postings_bytes, cudaHostRegisterDefault);
      if (pinned == cudaSuccess) {
        host_registered_ = true;
      } else if (pinned == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
      } else {
        WARP_CUDA_CHECK(pinned);
      }
      int device = 0;
      WARP_CUDA_CHECK(cudaGetDevice(&device));
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      WARP_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
      uint64_t keep = UINT64_MAX;  // freed list memory stays in the pool for the next miss
      WARP_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    } else {
      WARP_CUDA_CHECK(cudaMalloc(&postings_, std::max<size_t>(1, postings_bytes)));
      WARP_CUDA_CHECK(cudaMemcpy(postings_, index.postings.data(), postings_bytes, cudaMemcpyHostToDevice));
    }
    const size_t norm_count = std::max<size_t>(1, index.length_norms.size());
    WARP_CUDA_CHECK(cudaMalloc(&norms_, norm_count * sizeof(float)));
    if (!index.length_norms.empty()) {
      WARP_CUDA_CHECK(cudaMemcpy(norms_, index.length_norms.data(), index.length_norms.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    WARP_CUDA_CHECK(cudaMalloc(&exceptions_, exceptions.size() * sizeof(uint32_t)));
    WARP_CUDA_CHECK(cudaMemcpy(exceptions_, exceptions.data(), exceptions.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  } catch (...) {
    free_device();
    throw;
  }
  fixed_bytes_ = exceptions.size() * sizeof(uint32_t) + index.length_norms.size() * sizeof(float);
  stats_.caching = caching_;
  stats_.budget = caching_ ? options.memory_budget : postings_bytes;
  stats_.list_bytes_resident = caching_ ? 0 : postings_bytes;
}

DeviceIndex::~DeviceIndex() { free_device(); }

void DeviceIndex::free_device() {
  for (auto& [term, entry] : cache_) {
    cudaFree(entry.words);  // pool memory: cudaFree synchronises and returns it
    if (entry.ready != nullptr) cudaEventDestroy(entry.ready);
  }
  cache_.clear();
  if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
  if (host_registered_) cudaHostUnregister(const_cast<uint32_t*>(index_.postings.data()));
  cudaFree(postings_);
  cudaFree(norms_);
  cudaFree(exceptions_);
  pool_ = nullptr, postings_ = nullptr, norms_ = nullptr, exceptions_ = nullptr, host_registered_ = false;
}

void DeviceIndex::describe(const std::string& term, const TermInfo& info, const uint32_t* device_list_words,
                           DeviceList& list) const {
  const PostingListView view = index_.list(term, info);
  const uint32_t* host_base = index_.postings.data() + info.offset;
  auto on_device = [&](const uint32_t* host) { return device_list_words + (host - host_base); };
  ExceptionOffsets offsets{};
  if (auto it = exception_offsets_.find(term); it != exception_offsets_.end()) offsets = it->second;
  list.count = view.count;
  list.codec = static_cast<uint32_t>(view.codec->id());
  list.freq_codec = static_cast<uint32_t>(view.freq_codec->id());
  list.block_count = view.block_count;
  list.block_size = view.codec->block_size();
  list.block_last_docid = on_device(view.block_last_docid);
  list.block_max_score = reinterpret_cast<const float*>(on_device(reinterpret_cast<const uint32_t*>(view.block_max_score)));
  list.docs = {on_device(view.docs.endpoints), on_device(view.docs.words), exceptions_ + offsets.doc_positions,
               exceptions_ + offsets.doc_high};
  list.freqs = {on_device(view.freqs.endpoints), on_device(view.freqs.words), exceptions_ + offsets.freq_positions,
                exceptions_ + offsets.freq_high};
}

bool DeviceIndex::find(const std::string& term, DeviceList& list, const TermInfo** info_out) const {
  if (caching_) throw Error("DeviceIndex::find needs an all-resident index; use acquire");
  const TermInfo* info = index_.find(term);
  if (info == nullptr) return false;
  if (info_out != nullptr) *info_out = info;
  describe(term, *info, postings_ + info->offset, list);
  return true;
}

void DeviceIndex::evict_for(size_t bytes, cudaStream_t stream) const {
  // Least recently used first; lists held by queries in flight stay.
  for (auto it = lru_.end(); it != lru_.begin() && stats_.list_bytes_resident + bytes > options_.memory_budget;) {
    --it;
    CachedList* entry = *it;
    if (entry->pins != 0) continue;
    // Its last readers synchronised before releasing it: freeing on this stream is ordered after them.
    WARP_CUDA_CHECK(cudaFreeAsync(entry->words, stream));
    cudaEventDestroy(entry->ready);
    stats_.list_bytes_resident -= entry->bytes;
    ++stats_.evictions;
    it = lru_.erase(it);
    cache_.erase(entry->term);
  }
}

bool DeviceIndex::acquire(const std::string& term, DeviceList& list, const TermInfo** info_out, cudaStream_t stream,
                          Pins& pins) const {
  const TermInfo* info = index_.find(term);
  if (info == nullptr) return false;
  if (info_out != nullptr) *info_out = info;
  if (!caching_) {
    describe(term, *info, postings_ + info->offset, list);
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(term);
  if (it != cache_.end()) {
    CachedList& entry = it->second;
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, entry.lru);
    WARP_CUDA_CHECK(cudaStreamWaitEvent(stream, entry.ready, 0));  // a copy another stream started
    ++entry.pins;
    pins.entries.push_back(&entry);
    describe(term, *info, entry.words, list);
    return true;
  }
  ++stats_.misses;
  // The blob and the read padding after it (the next list's words or the arena's padding).
  const size_t bytes = (size_t{info->words} + kReadPaddingWords) * sizeof(uint32_t);
  evict_for(bytes, stream);  // a list larger than what is free still loads: the query needs it
  CachedList& entry = cache_[term];
  entry.term = term;
  entry.bytes = bytes;
  WARP_CUDA_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&entry.words), bytes, pool_, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(entry.words, index_.postings.data() + info->offset, bytes, cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaEventCreateWithFlags(&entry.ready, cudaEventDisableTiming));
  WARP_CUDA_CHECK(cudaEventRecord(entry.ready, stream));
  lru_.push_front(&entry);
  entry.lru = lru_.begin();
  entry.pins = 1;
  stats_.list_bytes_resident += bytes;
  stats_.bytes_copied += bytes;
  pins.entries.push_back(&entry);
  describe(term, *info, entry.words, list);
  return true;
}

void DeviceIndex::release(Pins& pins) const {
  if (pins.entries.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (void* p : pins.entries) --static_cast<CachedList*>(p)->pins;
  pins.entries.clear();
}

ListCacheStats DeviceIndex::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ListCacheStats s = stats_;
  s.bytes_resident = s.list_bytes_resident + fixed_bytes_;
  return s;
}

}  // namespace warp::gpu
