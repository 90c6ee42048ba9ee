#include "indexer/gpu/gpu_analyzer.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "common/util/cuda_check.cuh"
#include "common/util/status.hpp"
#include "indexer/gpu/device_array.cuh"
#include "indexer/gpu/gpu_analyzer_state.cuh"
#include "indexer/gpu/gpu_inverter.hpp"

namespace warp::pipeline {
namespace {

// A table slot: the token's 24 bytes zero-padded (tokens hold no zero byte, so the padding marks
// the end), its stem id, and a tag from the hash (odd; 0 empty, kBusy while being written).
struct alignas(32) Slot {
  unsigned tag;
  unsigned stem;
  unsigned long long w[3];
};
static_assert(sizeof(Slot) == 32);
constexpr unsigned kBusy = 2;

__device__ __forceinline__ bool is_token_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

__device__ __forceinline__ unsigned long long token_hash(unsigned long long w0, unsigned long long w1,
                                                         unsigned long long w2) {
  constexpr unsigned long long kMul = 0x9E3779B97F4A7C15ull;
  unsigned long long h = (w0 ^ 0x2545F4914F6CDD1Dull) * kMul;
  h ^= h >> 29;
  h = (h ^ w1) * kMul;
  h ^= h >> 29;
  h = (h ^ w2) * kMul;
  return h ^ (h >> 32);
}
__device__ __forceinline__ unsigned tag_of(unsigned long long h) { return static_cast<unsigned>(h >> 32) | 1u; }

// The document holding byte `at`: the last of the `docs` whose begin is at or before it.
__device__ __forceinline__ uint32_t document_of(const uint32_t* doc_begin, uint32_t docs, uint32_t at) {
  uint32_t lo = 0, hi = docs;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (doc_begin[mid] <= at) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Per byte: whether a token starts there; a byte outside ASCII marks its document for the CPU.
__global__ void mark_tokens(const unsigned char* text, uint32_t n, const uint32_t* doc_begin, uint32_t docs,
                            unsigned char* starts, unsigned char* non_ascii) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned char c = text[i];
  starts[i] = is_token_byte(c) && (i == 0 || !is_token_byte(text[i - 1]));
  if (c < 0x80) return;
  non_ascii[document_of(doc_begin, docs, i)] = 1;
}

// Per token: its end, the length cap, the folded bytes and the table's stem id (or a miss).
__global__ void look_up_tokens(const unsigned char* text, uint32_t n, const uint32_t* starts, const int* count,
                               uint32_t max_token_bytes, const Slot* slots, unsigned long long mask, uint32_t* values) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= static_cast<uint32_t>(*count)) return;
  const uint32_t begin = starts[t];
  uint32_t end = begin;
  unsigned long long w[3] = {0, 0, 0};
  while (end < n && is_token_byte(text[end])) {
    const uint32_t k = end - begin;
    if (k < GpuAnalyzer::kSlotTokenBytes) {
      unsigned char c = text[end];
      if (c >= 'A' && c <= 'Z') c += 32;
      w[k / 8] |= static_cast<unsigned long long>(c) << (8 * (k % 8));
    }
    ++end;
  }
  const uint32_t size = end - begin;
  if (size > max_token_bytes) {
    values[t] = GpuAnalyzer::kDropped;
    return;
  }
  uint32_t value = GpuAnalyzer::kMiss;
  if (size <= GpuAnalyzer::kSlotTokenBytes) {
    const unsigned long long h = token_hash(w[0], w[1], w[2]);
    const unsigned tag = tag_of(h);
    for (unsigned long long i = h & mask, probes = 0; probes <= mask; i = (i + 1) & mask, ++probes) {
      const volatile Slot& slot = slots[i];
      const unsigned seen = slot.tag;
      if (seen == 0 || seen == kBusy) break;  // a slot being written: a miss, which the CPU answers
      if (seen != tag) continue;
      __threadfence();  // the slot's words were written before its tag
      if (slot.w[0] == w[0] && slot.w[1] == w[1] && slot.w[2] == w[2]) {
        value = slot.stem;
        break;
      }
    }
  }
  values[t] = value;
}

__global__ void apply_patches(const uint32_t* patches, uint32_t n, uint32_t* values) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[patches[2 * i]] = patches[2 * i + 1];
}

// Per token: (stem id << doc_bits | its document), or `left` (above every such key) for a token
// left to the CPU (dropped, a miss not patched: an own-cache stem, a document outside ASCII),
// which sorts last. Keys of few bits take few radix passes.
__global__ void make_posting_keys(const uint32_t* values, const uint32_t* starts, const int* count,
                                  const uint32_t* doc_begin, uint32_t docs, const unsigned char* non_ascii,
                                  int doc_bits, unsigned long long left, unsigned long long* keys) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= static_cast<uint32_t>(*count)) return;
  const uint32_t lo = document_of(doc_begin, docs, starts[t]);
  const uint32_t value = values[t];
  keys[t] = value < GpuAnalyzer::kDropped && non_ascii[lo] == 0
                ? (static_cast<unsigned long long>(value) << doc_bits) | lo
                : left;
}

// Per distinct (stem, document): its document's distinct count, and its key rewritten as (stem id
// << 32 | document), ~0 for the tokens left to the CPU.
__global__ void count_distinct(unsigned long long* keys, const int* runs, int doc_bits, unsigned long long left,
                               uint32_t* distinct) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= static_cast<uint32_t>(*runs)) return;
  const unsigned long long key = keys[r];
  if (key == left) {
    keys[r] = ~0ull;
    return;
  }
  const uint32_t doc = static_cast<uint32_t>(key & ((1ull << doc_bits) - 1));
  atomicAdd(&distinct[doc], 1u);
  keys[r] = ((key >> doc_bits) << 32) | doc;
}

// Tokens the CPU stemmed: four words each (the token's 24 bytes, then its id).
__global__ void insert_tokens(const unsigned long long* learned, uint32_t n, Slot* slots, unsigned long long mask,
                              unsigned* count, unsigned capacity) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const unsigned long long w0 = learned[4 * t], w1 = learned[4 * t + 1], w2 = learned[4 * t + 2];
  const unsigned stem = static_cast<unsigned>(learned[4 * t + 3]);
  const unsigned long long h = token_hash(w0, w1, w2);
  const unsigned tag = tag_of(h);
  for (unsigned long long i = h & mask, probes = 0; probes <= mask; i = (i + 1) & mask, ++probes) {
    Slot& slot = slots[i];
    const unsigned seen = atomicCAS(&slot.tag, 0u, kBusy);
    if (seen == 0) {
      if (atomicAdd(count, 1u) >= capacity) {  // full: leave the slot empty again
        atomicExch(&slot.tag, 0u);
        return;
      }
      slot.stem = stem;
      slot.w[0] = w0, slot.w[1] = w1, slot.w[2] = w2;
      __threadfence();
      atomicExch(&slot.tag, tag);
      return;
    }
    if (seen == kBusy) return;  // another parser is writing this slot, maybe this very token: learnt again later
    if (seen != tag) continue;
    __threadfence();
    const volatile Slot& held = slot;
    if (held.w[0] == w0 && held.w[1] == w1 && held.w[2] == w2) return;  // already there
  }
}

}  // namespace

bool gpu_analysis_available(int device, std::string* why) { return gpu_inverter_available(device, why); }

GpuTokenTable::GpuTokenTable(int device, size_t tokens) : device_(device) {
  std::string why;
  if (!gpu_analysis_available(device, &why)) throw Error("no GPU analysis: " + why);
  slots_ = std::bit_ceil(std::max<size_t>(2 * tokens, 1024));
  WARP_CUDA_CHECK(cudaSetDevice(device));
  WARP_CUDA_CHECK(cudaMalloc(&slots_data_, slots_ * sizeof(Slot)));
  WARP_CUDA_CHECK(cudaMemset(slots_data_, 0, slots_ * sizeof(Slot)));
  WARP_CUDA_CHECK(cudaMalloc(&count_, sizeof(unsigned)));
  WARP_CUDA_CHECK(cudaMemset(count_, 0, sizeof(unsigned)));
  stems_ = std::max<size_t>(tokens, 1);
  WARP_CUDA_CHECK(cudaMalloc(&prefixes_, stems_ * sizeof(unsigned long long)));
  WARP_CUDA_CHECK(cudaMemset(prefixes_, 0, stems_ * sizeof(unsigned long long)));
}

GpuTokenTable::~GpuTokenTable() {
  cudaSetDevice(device_);
  if (slots_data_ != nullptr) cudaFree(slots_data_);
  if (count_ != nullptr) cudaFree(count_);
  if (prefixes_ != nullptr) cudaFree(prefixes_);
}

GpuAnalyzer::GpuAnalyzer(GpuTokenTable& table, size_t max_token_bytes)
    : state_(std::make_unique<State>()),
      table_(table),
      max_token_bytes_(max_token_bytes),
      noted_((table.stems() + 63) / 64, 0) {
  WARP_CUDA_CHECK(cudaSetDevice(table.device()));
  WARP_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  WARP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&state_->count_host), sizeof(int), cudaHostAllocDefault));
  WARP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&state_->runs_host), sizeof(int), cudaHostAllocDefault));
  state_->count.reserve(1);
}

GpuAnalyzer::~GpuAnalyzer() {
  cudaSetDevice(table_.device());
  if (state_->stream != nullptr) cudaStreamSynchronize(state_->stream);
  for (void* p : {static_cast<void*>(text_), static_cast<void*>(flags_), static_cast<void*>(starts_),
                  static_cast<void*>(values_), static_cast<void*>(posting_keys_), static_cast<void*>(posting_freqs_),
                  static_cast<void*>(doc_distinct_), static_cast<void*>(run_fetched_)}) {
    if (p != nullptr) cudaFreeHost(p);
  }
}

void GpuAnalyzer::grow_text(size_t bytes) {
  if (bytes <= text_capacity_) return;
  const size_t capacity = std::max<size_t>(bytes, text_capacity_ * 2);
  char* grown = nullptr;
  WARP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&grown), capacity, cudaHostAllocDefault));
  if (text_size_ > 0) std::memcpy(grown, text_, text_size_);
  if (text_ != nullptr) cudaFreeHost(text_);
  text_ = grown;
  text_capacity_ = capacity;
}

void GpuAnalyzer::begin_chunk() {
  if (inverting_) throw Error("GPU analysis: a chunk begun before the last one's inversion finished");
  text_size_ = 0;
  doc_begin_.assign(1, 0);
  tokens_ = 0;
  patches_.clear();
  postings_ = 0;
}

// Title and body each end with a separator, so no token runs from one into the next.
void GpuAnalyzer::add_document(std::string_view title, std::string_view body) {
  const size_t size = text_size_ + title.size() + body.size() + 2;
  if (size >= (size_t{1} << 31)) throw Error("GPU analysis: a chunk of 2 GiB or more");
  grow_text(size);
  char* out = text_ + text_size_;
  std::memcpy(out, title.data(), title.size());
  out[title.size()] = '\n';
  std::memcpy(out + title.size() + 1, body.data(), body.size());
  out[title.size() + 1 + body.size()] = '\n';
  text_size_ = size;
  doc_begin_.push_back(static_cast<uint32_t>(size));
}

void GpuAnalyzer::learn(std::string_view token, uint32_t stem_id) {
  // A chunk's first sight of many words repeats them: at most kMaxLearned a run (the most frequent
  // come first), the others learnt when missed again.
  if (token.empty() || token.size() > kSlotTokenBytes || learned_.size() >= 4 * kMaxLearned) return;
  uint64_t w[3] = {0, 0, 0};
  std::memcpy(w, token.data(), token.size());  // little-endian, as the device packs them
  learned_.insert(learned_.end(), {w[0], w[1], w[2], stem_id});
}

void GpuAnalyzer::start() {
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  tokens_ = 0;
  const uint32_t docs = static_cast<uint32_t>(documents());
  if (docs == 0) return;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  cudaStream_t stream = s.stream;
  const uint32_t n = static_cast<uint32_t>(text_size_);
  const unsigned long long mask = table_.slots() - 1;
  auto* slots = static_cast<Slot*>(table_.device_slots());

  write_noted_prefixes();   // before the lessons below: a stem found through them has its prefix
  if (!learned_.empty()) {  // the tokens learned since the last chunk first, so this one finds them
    s.learned.reserve(learned_.size());
    WARP_CUDA_CHECK(cudaMemcpyAsync(s.learned.data, learned_.data(), learned_.size() * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice, stream));
    const uint32_t count = static_cast<uint32_t>(learned_.size() / 4);
    insert_tokens<<<blocks_for(count), kThreads, 0, stream>>>(s.learned.data, count, slots, mask, table_.device_count(),
                                                              static_cast<unsigned>(table_.capacity()));
    WARP_CUDA_CHECK_LAUNCH();
  }

  s.text.reserve(n);
  s.start_flags.reserve(n);
  s.doc_begin.reserve(docs + 1);
  s.non_ascii.reserve(docs);
  reserve_pinned(flags_, s.flags_capacity, docs);
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.text.data, text_, n, cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.doc_begin.data, doc_begin_.data(), (docs + 1) * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, stream));
  WARP_CUDA_CHECK(cudaMemsetAsync(s.non_ascii.data, 0, docs, stream));
  mark_tokens<<<blocks_for(n), kThreads, 0, stream>>>(s.text.data, n, s.doc_begin.data, docs, s.start_flags.data,
                                                      s.non_ascii.data);
  WARP_CUDA_CHECK_LAUNCH();

  // The token starts, compacted in text order. At most one token per two bytes (a separator each).
  const size_t most = n / 2 + 1;
  s.starts.reserve(most);
  s.values.reserve(most);
  size_t temp_bytes = 0;
  thrust::counting_iterator<uint32_t> positions(0);
  WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, positions, s.start_flags.data, s.starts.data,
                                             s.count.data, n, stream));
  s.temp.reserve(std::max<size_t>(temp_bytes, 1));
  temp_bytes = s.temp.capacity;
  WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(s.temp.data, temp_bytes, positions, s.start_flags.data, s.starts.data,
                                             s.count.data, n, stream));
  look_up_tokens<<<blocks_for(most), kThreads, 0, stream>>>(
      reinterpret_cast<const unsigned char*>(s.text.data), n, s.starts.data, s.count.data,
      static_cast<uint32_t>(max_token_bytes_), slots, mask, s.values.data);
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.count_host, s.count.data, sizeof(int), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(flags_, s.non_ascii.data, docs, cudaMemcpyDeviceToHost, stream));
  started_ = true;
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

void GpuAnalyzer::finish() {
  if (!started_) return;
  started_ = false;
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  cudaStream_t stream = s.stream;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  learned_.clear();  // on the device now

  tokens_ = static_cast<uint32_t>(*s.count_host);
  reserve_pinned(starts_, s.tokens_capacity, tokens_);
  reserve_pinned(values_, s.values_capacity, tokens_);
  if (tokens_ > 0) {
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(starts_, s.starts.data, tokens_ * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(values_, s.values.data, tokens_ * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

void GpuAnalyzer::reserve(size_t text_bytes) {
  State& s = *state_;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  const size_t most = text_bytes / 2 + 1, docs = text_bytes / 8 + 1;
  s.text.reserve(text_bytes);
  s.start_flags.reserve(text_bytes);
  for (auto* a : {&s.starts, &s.values, &s.run_counts}) a->reserve(most);
  for (auto* a : {&s.keys, &s.sorted_keys, &s.run_keys}) a->reserve(most);
  s.doc_begin.reserve(docs + 1);
  s.non_ascii.reserve(docs);
  s.distinct.reserve(docs);
  s.runs.reserve(1);
  size_t select_bytes = 0, sort_bytes = 0, encode_bytes = 0;
  thrust::counting_iterator<uint32_t> positions(0);
  WARP_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, positions, s.start_flags.data, s.starts.data,
                                             s.count.data, text_bytes, s.stream));
  WARP_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, s.keys.data, s.sorted_keys.data, most, 0, 64, s.stream));
  WARP_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, s.sorted_keys.data, s.run_keys.data,
                                                     s.run_counts.data, s.runs.data, most, s.stream));
  s.temp.reserve(std::max({select_bytes, sort_bytes, encode_bytes, size_t{1}}));
  // The host's pinned arrays: the staging text, room for a token every 8 bytes (text holds one
  // every 11-12 bytes) and for a document every 256 (a denser chunk grows them). Sized for the
  // most a chunk can hold (a token every 2 bytes, a document every 8), they had raised a 16-thread
  // build's peak RSS by ~280 MiB; grown chunk by chunk, each growth's cudaFreeHost waited for the
  // whole device.
  grow_text(text_bytes);
  const size_t tokens = text_bytes / 8 + 1, documents = text_bytes / 256 + 1;
  reserve_pinned(starts_, s.tokens_capacity, tokens);
  reserve_pinned(values_, s.values_capacity, tokens);
  reserve_pinned(posting_keys_, s.keys_capacity, tokens);
  reserve_pinned(posting_freqs_, s.freqs_capacity, tokens);
  reserve_pinned(flags_, s.flags_capacity, documents);
  reserve_pinned(doc_distinct_, s.distinct_capacity, documents);
}

void GpuAnalyzer::warm_up() {
  begin_chunk();
  add_document("", "warm up");
  run();
  invert(1);
  State& s = *state_;
  insert_tokens<<<1, kThreads, 0, s.stream>>>(s.learned.data, 0, static_cast<Slot*>(table_.device_slots()),
                                              table_.slots() - 1, table_.device_count(), 0);
  WARP_CUDA_CHECK_LAUNCH();
  apply_patches<<<1, kThreads, 0, s.stream>>>(s.patches.data, 0, s.values.data);
  WARP_CUDA_CHECK_LAUNCH();
  WARP_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  begin_chunk();
  gpu_seconds_ = 0;
}

void GpuAnalyzer::start_invert(uint32_t stem_bound) {
  const auto began = std::chrono::steady_clock::now();
  State& s = *state_;
  postings_ = 0;
  const uint32_t docs = static_cast<uint32_t>(documents());
  if (tokens_ == 0 || docs == 0) return;
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  cudaStream_t stream = s.stream;
  if (!patches_.empty()) {
    const uint32_t n = static_cast<uint32_t>(patches_.size() / 2);
    s.patches.reserve(patches_.size());
    WARP_CUDA_CHECK(cudaMemcpyAsync(s.patches.data, patches_.data(), patches_.size() * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, stream));
    apply_patches<<<blocks_for(n), kThreads, 0, stream>>>(s.patches.data, n, s.values.data);
    WARP_CUDA_CHECK_LAUNCH();
  }
  s.keys.reserve(tokens_);
  s.sorted_keys.reserve(tokens_);
  s.run_keys.reserve(tokens_);
  s.run_counts.reserve(tokens_);
  s.distinct.reserve(docs);
  s.runs.reserve(1);
  stem_bound_ = std::max<uint32_t>(stem_bound, 1);
  const int doc_bits = std::max(1, static_cast<int>(std::bit_width(docs - 1)));
  const int key_bits = doc_bits + static_cast<int>(std::bit_width(std::max<uint32_t>(stem_bound, 1))) + 1;
  if (key_bits > 64) throw Error("GPU analysis: stem ids and documents do not fit a 64-bit key");
  const unsigned long long left = key_bits == 64 ? ~0ull : (1ull << key_bits) - 1;
  make_posting_keys<<<blocks_for(tokens_), kThreads, 0, stream>>>(s.values.data, s.starts.data, s.count.data,
                                                                  s.doc_begin.data, docs, s.non_ascii.data, doc_bits,
                                                                  left, s.keys.data);
  WARP_CUDA_CHECK_LAUNCH();
  size_t sort_bytes = 0, encode_bytes = 0;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, s.keys.data, s.sorted_keys.data, tokens_, 0,
                                                 key_bits, stream));
  WARP_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, s.sorted_keys.data, s.run_keys.data,
                                                     s.run_counts.data, s.runs.data, tokens_, stream));
  s.temp.reserve(std::max(sort_bytes, encode_bytes));
  sort_bytes = encode_bytes = s.temp.capacity;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(s.temp.data, sort_bytes, s.keys.data, s.sorted_keys.data, tokens_, 0,
                                                 key_bits, stream));
  WARP_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(s.temp.data, encode_bytes, s.sorted_keys.data, s.run_keys.data,
                                                     s.run_counts.data, s.runs.data, tokens_, stream));
  WARP_CUDA_CHECK(cudaMemsetAsync(s.distinct.data, 0, docs * sizeof(uint32_t), stream));
  count_distinct<<<blocks_for(tokens_), kThreads, 0, stream>>>(s.run_keys.data, s.runs.data, doc_bits, left,
                                                               s.distinct.data);
  WARP_CUDA_CHECK_LAUNCH();
  // Copied back at once, as many as there are tokens (the runs, at most that many, are counted on
  // the device): a fifth more bytes than the runs need, and one wait instead of two.
  reserve_pinned(doc_distinct_, s.distinct_capacity, docs);
  reserve_pinned(posting_keys_, s.keys_capacity, tokens_);
  reserve_pinned(posting_freqs_, s.freqs_capacity, tokens_);
  WARP_CUDA_CHECK(cudaMemcpyAsync(s.runs_host, s.runs.data, sizeof(int), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(doc_distinct_, s.distinct.data, docs * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(posting_keys_, s.run_keys.data, tokens_ * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(posting_freqs_, s.run_counts.data, tokens_ * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  inverting_ = true;
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

void GpuAnalyzer::finish_invert() {
  if (!inverting_) return;
  inverting_ = false;
  const auto began = std::chrono::steady_clock::now();
  WARP_CUDA_CHECK(cudaSetDevice(table_.device()));
  WARP_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
  size_t runs = static_cast<size_t>(*state_->runs_host);
  if (runs > tokens_) throw Error("GPU analysis: the device counted more postings than tokens");
  if (runs > 0 && posting_keys_[runs - 1] == ~0ull) --runs;  // the tokens left to the CPU
  postings_ = runs;
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

}  // namespace warp::pipeline
