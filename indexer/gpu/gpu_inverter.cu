#include "indexer/gpu/gpu_inverter.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common/util/cuda_check.cuh"
#include "common/util/status.hpp"
#include "indexer/gpu/device_array.cuh"

namespace warp::pipeline {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// FNV-1a over the collection's four bytes and the suffix; the collection goes in so that equal
// suffixes of different collections differ.
__global__ void hash_terms(const PieceEntry* entries, const char* bytes, uint32_t n, uint64_t mask, uint64_t* hashes,
                           uint32_t* docs, uint32_t* order) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const PieceEntry e = entries[i];
  uint64_t h = 0xcbf29ce484222325ull;
  for (int b = 0; b < 4; ++b) h = (h ^ ((e.collection >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
  for (uint32_t k = 0; k < e.suffix_size; ++k)
    h = (h ^ static_cast<unsigned char>(bytes[e.suffix_offset + k])) * 0x100000001b3ull;
  hashes[i] = h & mask;
  docs[i] = e.doc;
  order[i] = i;
}

__global__ void gather_hashes(const uint64_t* hashes, const uint32_t* order, uint32_t n, uint64_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = hashes[order[i]];
}

// Heads of equal hashes, the postings in sorted order, and a byte-for-byte check of every entry
// against the one before it in the same run of hashes.
__global__ void mark_terms(const PieceEntry* entries, const char* bytes, const uint64_t* sorted, const uint32_t* order,
                           uint32_t n, uint32_t* heads, Posting* postings, int* collision) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const PieceEntry e = entries[order[i]];
  postings[i] = {e.doc, e.freq};
  const bool head = i == 0 || sorted[i] != sorted[i - 1];
  heads[i] = head ? 1 : 0;
  if (head) return;
  const PieceEntry p = entries[order[i - 1]];
  bool same = p.collection == e.collection && p.suffix_size == e.suffix_size;
  for (uint32_t k = 0; same && k < e.suffix_size; ++k) same = bytes[p.suffix_offset + k] == bytes[e.suffix_offset + k];
  if (!same) atomicExch(collision, 1);
}

__global__ void term_starts(const uint32_t* heads, const uint32_t* slots, const uint32_t* order, uint32_t n,
                            uint32_t* starts, uint32_t* names) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || heads[i] == 0) return;
  starts[slots[i]] = i;
  names[slots[i]] = order[i];
}

// Each distinct term's first 8 bytes (the collection's three letters, then the suffix), big-endian
// and zero-padded, so that integer order is bytewise order up to ties.
__global__ void term_keys(const PieceEntry* entries, const char* bytes, const uint32_t* names, uint32_t terms,
                          uint64_t* keys, uint32_t* ids) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= terms) return;
  const PieceEntry e = entries[names[t]];
  unsigned char head[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int used = 0;
  if (e.collection < 17576) {
    head[0] = static_cast<unsigned char>('a' + e.collection / 676);
    head[1] = static_cast<unsigned char>('a' + e.collection / 26 % 26);
    head[2] = static_cast<unsigned char>('a' + e.collection % 26);
    used = 3;
  }
  for (uint32_t k = 0; used < 8 && k < e.suffix_size; ++k)
    head[used++] = static_cast<unsigned char>(bytes[e.suffix_offset + k]);
  uint64_t key = 0;
  for (int b = 0; b < 8; ++b) key = (key << 8) | head[b];
  keys[t] = key;
  ids[t] = t;
}

}  // namespace

struct GpuInverter::State {
  int device = 0;
  uint64_t mask = ~0ull;
  unsigned bits = 64;
  cudaStream_t stream = nullptr;
  DeviceArray<PieceEntry> entries;
  DeviceArray<char> bytes;
  DeviceArray<uint64_t> hashes, gathered, sorted, term_keys, term_keys_sorted;
  DeviceArray<uint32_t> term_ids, term_order;
  DeviceArray<uint32_t> docs, docs_sorted, order, order_by_doc, order_sorted, heads, slots, starts, names;
  DeviceArray<Posting> postings;
  DeviceArray<int> collision;
  DeviceArray<unsigned char> temp;
  ~State() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

bool gpu_inverter_available(int device, std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why != nullptr) *why = cudaGetErrorString(status);
    cudaGetLastError();
    return false;
  }
  if (device < 0 || device >= count) {
    if (why != nullptr) *why = "no CUDA device " + std::to_string(device) + " (" + std::to_string(count) + " present)";
    return false;
  }
  return true;
}

GpuInverter::GpuInverter(int device, unsigned hash_bits) : state_(std::make_unique<State>()) {
  std::string why;
  if (!gpu_inverter_available(device, &why)) throw Error("no GPU indexer: " + why);
  state_->device = device;
  state_->bits = std::clamp(hash_bits, 1u, 64u);
  state_->mask = state_->bits == 64 ? ~0ull : (1ull << state_->bits) - 1;
  WARP_CUDA_CHECK(cudaSetDevice(device));
  WARP_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  state_->collision.reserve(1);
}

GpuInverter::~GpuInverter() = default;

void GpuInverter::invert(const std::vector<PieceEntry>& entries, const std::string& suffixes, InvertedBatch& out) {
  const auto start = std::chrono::steady_clock::now();
  State& s = *state_;
  out.postings.clear(), out.starts.clear(), out.names.clear(), out.order.clear(), out.keys.clear();
  out.collision = false;
  if (entries.empty()) {
    out.starts.push_back(0);
    return;
  }
  if (entries.size() >= (1ull << 31)) throw Error("GPU indexer: a batch of 2^31 postings or more");
  const uint32_t n = static_cast<uint32_t>(entries.size());
  WARP_CUDA_CHECK(cudaSetDevice(s.device));
  cudaStream_t stream = s.stream;
  s.entries.reserve(n);
  s.bytes.reserve(std::max<size_t>(suffixes.size(), 1));
  for (auto* a :
       {&s.docs, &s.docs_sorted, &s.order, &s.order_by_doc, &s.order_sorted, &s.heads, &s.slots, &s.starts, &s.names})
    a->reserve(n);
  for (auto* a : {&s.hashes, &s.gathered, &s.sorted}) a->reserve(n);
  s.postings.reserve(n);
  WARP_CUDA_CHECK(
      cudaMemcpyAsync(s.entries.data, entries.data(), n * sizeof(PieceEntry), cudaMemcpyHostToDevice, stream));
  if (!suffixes.empty()) {
    WARP_CUDA_CHECK(cudaMemcpyAsync(s.bytes.data, suffixes.data(), suffixes.size(), cudaMemcpyHostToDevice, stream));
  }
  WARP_CUDA_CHECK(cudaMemsetAsync(s.collision.data, 0, sizeof(int), stream));
  hash_terms<<<blocks_for(n), kThreads, 0, stream>>>(s.entries.data, s.bytes.data, n, s.mask, s.hashes.data,
                                                     s.docs.data, s.order.data);
  WARP_CUDA_CHECK_LAUNCH();

  // Temporary storage for the largest of the three device-wide passes.
  size_t by_doc = 0, by_hash = 0, scan = 0;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, by_doc, s.docs.data, s.docs_sorted.data, s.order.data,
                                                  s.order_by_doc.data, n, 0, 32, stream));
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, by_hash, s.gathered.data, s.sorted.data, s.order_by_doc.data,
                                                  s.order_sorted.data, n, 0, static_cast<int>(s.bits), stream));
  WARP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, s.heads.data, s.slots.data, n, stream));
  size_t temp_bytes = std::max(std::max(by_doc, by_hash), std::max(scan, size_t{1}));
  s.temp.reserve(temp_bytes);
  temp_bytes = s.temp.capacity;

  size_t bytes = temp_bytes;
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp.data, bytes, s.docs.data, s.docs_sorted.data, s.order.data,
                                                  s.order_by_doc.data, n, 0, 32, stream));
  gather_hashes<<<blocks_for(n), kThreads, 0, stream>>>(s.hashes.data, s.order_by_doc.data, n, s.gathered.data);
  WARP_CUDA_CHECK_LAUNCH();
  bytes = temp_bytes;  // LSD radix sorts are stable: equal hashes keep their doc order
  WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp.data, bytes, s.gathered.data, s.sorted.data,
                                                  s.order_by_doc.data, s.order_sorted.data, n, 0,
                                                  static_cast<int>(s.bits), stream));
  mark_terms<<<blocks_for(n), kThreads, 0, stream>>>(s.entries.data, s.bytes.data, s.sorted.data, s.order_sorted.data,
                                                     n, s.heads.data, s.postings.data, s.collision.data);
  WARP_CUDA_CHECK_LAUNCH();
  bytes = temp_bytes;
  WARP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(s.temp.data, bytes, s.heads.data, s.slots.data, n, stream));
  term_starts<<<blocks_for(n), kThreads, 0, stream>>>(s.heads.data, s.slots.data, s.order_sorted.data, n, s.starts.data,
                                                      s.names.data);
  WARP_CUDA_CHECK_LAUNCH();

  uint32_t last_slot = 0, last_head = 0;
  int collision = 0;
  WARP_CUDA_CHECK(cudaMemcpyAsync(&last_slot, s.slots.data + n - 1, sizeof last_slot, cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(&last_head, s.heads.data + n - 1, sizeof last_head, cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaMemcpyAsync(&collision, s.collision.data, sizeof collision, cudaMemcpyDeviceToHost, stream));
  WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.collision = collision != 0;
  if (!out.collision) {
    const uint32_t terms = last_slot + last_head;
    for (auto* a : {&s.term_ids, &s.term_order}) a->reserve(terms);
    for (auto* a : {&s.term_keys, &s.term_keys_sorted}) a->reserve(terms);
    term_keys<<<blocks_for(terms), kThreads, 0, stream>>>(s.entries.data, s.bytes.data, s.names.data, terms,
                                                          s.term_keys.data, s.term_ids.data);
    WARP_CUDA_CHECK_LAUNCH();
    size_t key_sort = 0;
    WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, key_sort, s.term_keys.data, s.term_keys_sorted.data,
                                                    s.term_ids.data, s.term_order.data, terms, 0, 64, stream));
    s.temp.reserve(key_sort);
    key_sort = s.temp.capacity;
    WARP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp.data, key_sort, s.term_keys.data, s.term_keys_sorted.data,
                                                    s.term_ids.data, s.term_order.data, terms, 0, 64, stream));
    out.postings.resize(n);
    out.starts.resize(terms + 1);
    out.names.resize(terms);
    out.order.resize(terms);
    out.keys.resize(terms);
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(out.order.data(), s.term_order.data, terms * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(cudaMemcpyAsync(out.keys.data(), s.term_keys_sorted.data, terms * sizeof(uint64_t),
                                    cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(out.postings.data(), s.postings.data, n * sizeof(Posting), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(out.starts.data(), s.starts.data, terms * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(
        cudaMemcpyAsync(out.names.data(), s.names.data, terms * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    WARP_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.starts[terms] = n;
  }
  gpu_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace warp::pipeline
