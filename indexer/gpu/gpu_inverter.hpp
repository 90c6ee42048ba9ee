// Inverting a batch of postings on the GPU, for the GPU indexers (indexers.hpp). Host-only header:
// callers need no CUDA headers; builds without CUDA get a stub whose constructor throws.
//
// One batch: entries (collection, suffix, doc, freq) with their suffix bytes go to the device;
// a thread per entry hashes its term (collection and suffix, FNV-1a, 64 bits); two stable radix
// sorts (by doc, then by hash) order the entries by (term hash, doc); heads of equal hashes mark
// the distinct terms, and every entry is compared byte for byte with the one before it, so two
// terms sharing a hash are detected (the batch is then reported, never merged wrongly). Back
// come the postings in that order, where each term's run starts, one entry per term to name it,
// and the terms sorted on the device by their first 8 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/index/posting_list.hpp"
#include "indexer/postings/piece.hpp"

namespace warp::pipeline {

struct InvertedBatch {
  std::vector<Posting> postings;  // by (term hash, doc)
  std::vector<uint32_t> starts;   // per distinct term, its first posting; then the count
  std::vector<uint32_t> names;    // per distinct term, an entry of the batch holding it
  // The distinct terms in bytewise order of their first 8 bytes (collection prefix and suffix),
  // with those 8 bytes big-endian: terms with equal keys are left for the caller to order.
  std::vector<uint32_t> order;
  std::vector<uint64_t> keys;
  bool collision = false;  // two different terms shared a hash: do not use this batch
};

class GpuInverter {
 public:
  // `hash_bits` < 64 keeps only that many bits of each hash (tests: collisions on purpose).
  GpuInverter(int device, unsigned hash_bits = 64);
  ~GpuInverter();
  GpuInverter(const GpuInverter&) = delete;
  GpuInverter& operator=(const GpuInverter&) = delete;

  void invert(const std::vector<PieceEntry>& entries, const std::string& suffixes, InvertedBatch& out);
  double gpu_seconds() const { return gpu_seconds_; }  // device work and copies, summed

 private:
  struct State;
  std::unique_ptr<State> state_;
  double gpu_seconds_ = 0;
};

// True when this build has CUDA and a GPU of that ordinal exists; else false with the
// reason in `why`.
bool gpu_inverter_available(int device, std::string* why = nullptr);

}  // namespace warp::pipeline
