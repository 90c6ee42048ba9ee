// Basic types shared by the index, the codecs and the query processors.
#pragma once
#include <cstdint>
#include <limits>

namespace warp {

using DocId = uint32_t;  // global document id, dense from 0 within a generation
using TermFreq = uint32_t;
using Score = float;

// One past the largest usable docID; cursors report it when exhausted. Codecs still handle
// the value 2^32-1 as data: only the index reserves it.
inline constexpr DocId kEndDoc = std::numeric_limits<DocId>::max();

}  // namespace warp
