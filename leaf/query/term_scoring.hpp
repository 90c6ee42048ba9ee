// A query term scored against one partition: its BM25 weight in the query's score units (bm25.hpp)
// and the scale that takes the partition's stored bounds (block and list maxima) into those units.
#pragma once

namespace warp {

struct TermScoring {
  float unit_weight = 0;
  float bound_scale = 0;
};

}  // namespace warp
