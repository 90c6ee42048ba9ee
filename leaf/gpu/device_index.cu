#include "leaf/gpu/device_index.hpp"

#include <vector>

#include "leaf/gpu/cuda_check.cuh"

namespace warp::gpu {

DeviceIndex::DeviceIndex(const IndexView& index) : index_(index) {
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
  try {
    WARP_CUDA_CHECK(cudaMalloc(&postings_, index.postings.size() * sizeof(uint32_t)));
    WARP_CUDA_CHECK(cudaMemcpy(postings_, index.postings.data(), index.postings.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
    const size_t norm_count = std::max<size_t>(1, index.length_norms.size());
    WARP_CUDA_CHECK(cudaMalloc(&norms_, norm_count * sizeof(float)));
    if (!index.length_norms.empty()) {
      WARP_CUDA_CHECK(cudaMemcpy(norms_, index.length_norms.data(), index.length_norms.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    WARP_CUDA_CHECK(cudaMalloc(&exceptions_, exceptions.size() * sizeof(uint32_t)));
    WARP_CUDA_CHECK(cudaMemcpy(exceptions_, exceptions.data(), exceptions.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  } catch (...) {
    cudaFree(postings_), cudaFree(norms_), cudaFree(exceptions_);
    throw;
  }
  bytes_ = (index.postings.size() + exceptions.size()) * sizeof(uint32_t) + index.length_norms.size() * sizeof(float);
}

DeviceIndex::~DeviceIndex() {
  cudaFree(postings_);
  cudaFree(norms_);
  cudaFree(exceptions_);
}

DeviceSequence DeviceIndex::device_sequence(const EncodedView& seq, uint64_t positions, uint64_t high) const {
  const uint32_t* base = index_.postings.data();
  DeviceSequence out;
  out.endpoints = postings_ + (seq.endpoints - base);
  out.words = postings_ + (seq.words - base);
  out.exception_positions = exceptions_ + positions;
  out.exception_high = exceptions_ + high;
  return out;
}

bool DeviceIndex::find(const std::string& term, DeviceList& list, const TermInfo** info_out) const {
  const TermInfo* info = index_.find(term);
  if (info == nullptr) return false;
  if (info_out != nullptr) *info_out = info;
  const PostingListView view = index_.list(term, *info);
  list.count = view.count;
  list.codec = static_cast<uint32_t>(view.codec->id());
  list.freq_codec = static_cast<uint32_t>(view.freq_codec->id());
  list.block_count = view.block_count;
  list.block_size = view.codec->block_size();
  list.block_last_docid = postings_ + (view.block_last_docid - index_.postings.data());
  ExceptionOffsets offsets{};
  if (auto it = exception_offsets_.find(term); it != exception_offsets_.end()) offsets = it->second;
  list.docs = device_sequence(view.docs, offsets.doc_positions, offsets.doc_high);
  list.freqs = device_sequence(view.freqs, offsets.freq_positions, offsets.freq_high);
  return true;
}

}  // namespace warp::gpu
