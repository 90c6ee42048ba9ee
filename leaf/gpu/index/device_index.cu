#include "leaf/gpu/index/device_index.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/codec/codec.hpp"
#include "common/util/status.hpp"
#include "common/util/cuda_check.cuh"
#include "leaf/gpu/decode/list_decode.cuh"

namespace warp::gpu {
namespace {

// One thread block per block of the list: BM25 of its postings, maxima per slice (float bits).
template <int BS>
__global__ void __launch_bounds__(BS)
    slice_maxima_kernel(DeviceList list, float weight, const float* norms, uint32_t doc_begin, uint32_t* maxima) {
  __shared__ BlockDecodeStorage<BS> storage;
  const uint32_t block = blockIdx.x;
  const uint32_t n = min(static_cast<uint32_t>(BS), list.count - block * BS);
  uint32_t doc, freq;
  decode_postings<BS>(list, block, n, storage, doc, freq);
  const bool live = threadIdx.x < n;
  const uint32_t local = live ? doc - doc_begin : 0;
  const uint32_t bits = live ? __float_as_uint(bm25_dev(weight, freq, norms[local])) : 0;
  atomic_max_runs(maxima, local / kSliceDocs, bits, live);
}

// A byte per slice: 0 without postings, else floor(max / scale) + 1 (at most 255), so that
// byte × scale bounds the slice's scores from above.
__global__ void quantize_slices_kernel(const uint32_t* maxima, uint32_t slices, float scale, uint8_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= slices) return;
  const uint32_t bits = maxima[i];
  out[i] = bits == 0 ? 0 : static_cast<uint8_t>(min(255u, static_cast<uint32_t>(__uint_as_float(bits) / scale) + 1u));
}

// One thread per block: the tiles whose first document falls in the block's docID range
// (previous block's last, this block's last] start their search at this block; tiles past the
// list's last docID get block_count.
__global__ void tile_blocks_kernel(DeviceList list, uint32_t doc_begin, uint32_t tiles, uint32_t* out) {
  const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= list.block_count) return;
  const uint32_t first_tile = b == 0 ? 0 : (list.block_last_docid[b - 1] + 1 - doc_begin + kTileDocs - 1) / kTileDocs;
  const uint32_t last_tile = (list.block_last_docid[b] - doc_begin) / kTileDocs;
  for (uint32_t t = first_tile; t <= last_tile && t < tiles; ++t) out[t] = b;
  if (b + 1 == list.block_count) {
    for (uint32_t t = last_tile + 1; t < tiles; ++t) out[t] = list.block_count;
  }
}

}  // namespace

DeviceIndex::DeviceIndex(const IndexView& index, DeviceIndexOptions options) : index_(index), options_(options) {
  std::vector<uint32_t> exceptions;
  for (const auto& [term, info] : index.lexicon) {
    const PostingListView list = index.list(term, info);
    max_list_blocks_ = std::max(max_list_blocks_, list.block_count);
    max_list_slots_ = std::max(max_list_slots_, list.block_count * list.codec->block_size());
    block_size_ = list.codec->block_size();
    if (list.codec->id() != CodecId::kPforDing) continue;
    ExceptionOffsets offsets{};
    uint64_t* slots[2][2] = {{&offsets.doc_positions, &offsets.doc_high},
                             {&offsets.freq_positions, &offsets.freq_high}};
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
      const cudaError_t pinned =
          cudaHostRegister(const_cast<uint32_t*>(index.postings.data()), postings_bytes, cudaHostRegisterDefault);
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
    norm_count_ = norm_count;
    WARP_CUDA_CHECK(cudaMalloc(&norms_, norm_count * sizeof(float)));
    if (!index.length_norms.empty()) {
      WARP_CUDA_CHECK(cudaMemcpy(norms_, index.length_norms.data(), index.length_norms.size() * sizeof(float),
                                 cudaMemcpyHostToDevice));
    }
    WARP_CUDA_CHECK(cudaMalloc(&exceptions_, exceptions.size() * sizeof(uint32_t)));
    WARP_CUDA_CHECK(
        cudaMemcpy(exceptions_, exceptions.data(), exceptions.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  } catch (...) {
    free_device();
    throw;
  }
  fixed_bytes_ = exceptions.size() * sizeof(uint32_t) + index.length_norms.size() * sizeof(float);
  if (!caching_) {
    try {
      build_slice_maxima(postings_bytes / 2);
    } catch (...) {
      free_device();
      throw;
    }
    fixed_bytes_ += stats_.slice_bytes;
  }
  stats_.caching = caching_;
  stats_.budget = caching_ ? options.memory_budget : postings_bytes;
  stats_.list_bytes_resident = caching_ ? 0 : postings_bytes;
}

DeviceIndex::~DeviceIndex() {
  overlay_cache_.clear();  // every query has ended: the buffers are all free again
  for (float* buffer : overlay_buffers_) cudaFree(buffer);
  free_device();
}

std::shared_ptr<const float> DeviceIndex::overlay_norms(const LiveOverlay& live, cudaStream_t stream) const {
  std::shared_ptr<const float> dropped;  // out of the cache: handed back after the lock below is let go
  std::lock_guard<std::mutex> lock(overlay_mutex_);
  for (const auto& [serial, norms] : overlay_cache_)
    if (serial == live.serial) return norms;
  std::vector<float> host(norm_count_, 0.0f);
  std::copy_n(live.length_norms.begin(), std::min(live.length_norms.size(), host.size()), host.begin());
  for (size_t d = 0; d < live.deleted.size() && d < host.size(); ++d)
    if (live.deleted[d]) host[d] = INFINITY;
  if (overlay_free_.empty()) {
    float* buffer = nullptr;
    WARP_CUDA_CHECK(cudaMalloc(&buffer, norm_count_ * sizeof(float)));
    overlay_buffers_.push_back(buffer);
    overlay_free_.push_back(buffer);
  }
  float* buffer = overlay_free_.back();
  // Synchronous on the caller's stream: a query of another stream that finds it cached reads it
  // whole. A failed copy leaves the buffer free.
  WARP_CUDA_CHECK(cudaMemcpyAsync(buffer, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  overlay_free_.pop_back();
  // Handed back to the free buffers once neither the cache nor a query holds it.
  std::shared_ptr<const float> norms(buffer, [this](const float* held) {
    std::lock_guard<std::mutex> back(overlay_mutex_);
    overlay_free_.push_back(const_cast<float*>(held));
  });
  overlay_cache_.insert(overlay_cache_.begin(), {live.serial, norms});
  if (overlay_cache_.size() > 2) {
    dropped = std::move(overlay_cache_.back().second);
    overlay_cache_.pop_back();
  }
  return norms;
}

// Slice maxima for the lists with at least a posting per 4 slices, longest first, within `budget`
// bytes; shorter lists are cheap to decode at query time (or_tiles.cu).
void DeviceIndex::build_slice_maxima(size_t budget) {
  const uint32_t slices = (index_.doc_count() + kSliceDocs - 1) / kSliceDocs;
  if (slices == 0 || index_.length_norms.size() < index_.doc_count()) return;  // no scores: a decode-only view
  std::vector<std::pair<uint32_t, const std::string*>> long_lists;
  for (const auto& [term, info] : index_.lexicon) {
    if (uint64_t{info.df} * 4 >= slices) long_lists.push_back({info.df, &term});
  }
  std::sort(long_lists.begin(), long_lists.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  long_lists.resize(std::min<size_t>(long_lists.size(), budget / (slices + (slices / 32 + 1) * sizeof(uint32_t))));
  if (long_lists.empty()) return;
  const uint32_t tiles = (index_.doc_count() + kTileDocs - 1) / kTileDocs;
  WARP_CUDA_CHECK(cudaMalloc(&slice_maxima_, long_lists.size() * size_t{slices}));
  WARP_CUDA_CHECK(cudaMalloc(&tile_blocks_, long_lists.size() * size_t{tiles} * sizeof(uint32_t)));
  uint32_t* maxima = nullptr;
  WARP_CUDA_CHECK(cudaMalloc(&maxima, size_t{slices} * sizeof(uint32_t)));
  for (size_t i = 0; i < long_lists.size(); ++i) {
    const std::string& term = *long_lists[i].second;
    const TermInfo& info = index_.lexicon.at(term);
    DeviceList list;
    describe(term, info, postings_ + info.offset, list);
    const PostingListView view = index_.list(term, info);
    if (list.block_count == 0 || view.max_score <= 0) continue;
    const float weight = bm25_term_weight(bm25_idf(info.df, index_.meta.stats.doc_count), index_.meta.bm25);
    uint8_t* out = slice_maxima_ + i * size_t{slices};
    WARP_CUDA_CHECK(cudaMemsetAsync(maxima, 0, size_t{slices} * sizeof(uint32_t)));
    if (list.block_size == 256) {
      slice_maxima_kernel<256><<<list.block_count, 256>>>(list, weight, norms_, index_.meta.doc_begin, maxima);
    } else {
      slice_maxima_kernel<128><<<list.block_count, 128>>>(list, weight, norms_, index_.meta.doc_begin, maxima);
    }
    WARP_CUDA_CHECK_LAUNCH();
    quantize_slices_kernel<<<(slices + 255) / 256, 256>>>(maxima, slices, view.max_score / 255.0f, out);
    WARP_CUDA_CHECK_LAUNCH();
    tile_blocks_kernel<<<(list.block_count + 255) / 256, 256>>>(list, index_.meta.doc_begin, tiles,
                                                                tile_blocks_ + i * size_t{tiles});
    WARP_CUDA_CHECK_LAUNCH();
    slice_offsets_.emplace(term, i);
  }
  WARP_CUDA_CHECK(cudaDeviceSynchronize());
  cudaFree(maxima);
  stats_.slice_bytes = long_lists.size() * (size_t{slices} + size_t{tiles} * sizeof(uint32_t));
}

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
  cudaFree(slice_maxima_);
  cudaFree(tile_blocks_);
  slice_maxima_ = nullptr, tile_blocks_ = nullptr;
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
  list.block_max_score =
      reinterpret_cast<const float*>(on_device(reinterpret_cast<const uint32_t*>(view.block_max_score)));
  if (auto it = slice_offsets_.find(term); it != slice_offsets_.end()) {
    const uint32_t slices = (index_.doc_count() + kSliceDocs - 1) / kSliceDocs;
    const uint32_t tiles = (index_.doc_count() + kTileDocs - 1) / kTileDocs;
    list.slice_max = slice_maxima_ + it->second * slices;
    list.slice_scale = view.max_score / 255.0f;
    list.tile_first_block = tile_blocks_ + it->second * tiles;
  }
  list.docs = {on_device(view.docs.endpoints), on_device(view.docs.words), exceptions_ + offsets.doc_positions,
               exceptions_ + offsets.doc_high, static_cast<uint32_t>(view.docs.word_count)};
  list.freqs = {on_device(view.freqs.endpoints), on_device(view.freqs.words), exceptions_ + offsets.freq_positions,
                exceptions_ + offsets.freq_high, static_cast<uint32_t>(view.freqs.word_count)};
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
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(entry.words, index_.postings.data() + info->offset, bytes, cudaMemcpyHostToDevice, stream));
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
