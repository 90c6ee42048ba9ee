// Plain descriptors of one posting list in GPU memory, passed to kernels by value.
#pragma once
#include <cstdint>

namespace warp::gpu {

struct DeviceSequence {
  const uint32_t* endpoints = nullptr;
  const uint32_t* words = nullptr;
  const uint32_t* exception_positions = nullptr;  // pfor-ding only: absolute positions
  const uint32_t* exception_high = nullptr;       // pfor-ding only: high bits above the width
  uint32_t word_count = 0;                        // words at `words` (the bound of a prefetch)
};

// Documents per slice of the docID-range maxima (Dimopoulos et al., WSDM 2013: block-max by
// fixed docID ranges instead of by postings): for each long list, the largest BM25 score of its
// postings in each slice of 128 consecutive documents, one byte each, rounded up.
inline constexpr uint32_t kSliceDocs = 128;
// Documents per tile of the OR tiles (or_tiles.hpp); long lists also keep, per tile, the first
// block whose last docID reaches the tile, so a tile finds its blocks without a search.
inline constexpr uint32_t kTileDocs = 4096;

struct DeviceList {
  uint32_t count = 0;
  uint32_t codec = 0;       // CodecId of the docIDs
  uint32_t freq_codec = 0;  // CodecId of the frequencies
  uint32_t block_count = 0;
  uint32_t block_size = 0;
  const uint32_t* block_last_docid = nullptr;  // device pointers into the arena
  const float* block_max_score = nullptr;      // BM25 upper bound of each block (block-max)
  const uint8_t* slice_max = nullptr;          // per slice of the partition: bound = value × slice_scale; null: none
  float slice_scale = 0;
  const uint32_t* tile_first_block = nullptr;  // per tile of the partition, with slice_max; null: none
  DeviceSequence docs;
  DeviceSequence freqs;
};

// One list of a query: the term's BM25 weight in the query's score units and the scale of the
// list's stored bounds into them (TermScoring, leaf/query/term_scoring.hpp).
struct QueryList {
  DeviceList list;
  float weight = 0;
  float bound_scale = 0;
};

}  // namespace warp::gpu
