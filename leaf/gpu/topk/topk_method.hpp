// The GPU top-k selection methods (topk_select.cuh implements them). Host-only header.
#pragma once

namespace warp::gpu {

// kBucketSelect: count keys into buckets, keep the bucket of the k-th and above, sort those.
// kMaxTree: Ding et al. 2009 §8.2, a multi-level max structure of degree 32 extracted k times.
enum class TopkMethod { kBucketSelect, kMaxTree };

// How OR (and the OR half of AND+OR) scores documents.
// kTiles: document tiles with accumulators in shared memory and block-max pruning (or_tiles.hpp).
// kTilesUnstaged: the same without pass 2's MaxScore stages (every list decoded over every live
// slice): for A/B runs and the tests that show what the stages save.
// kDenseAccumulators: Ding et al. §8.3, one global accumulator per document. The max-tree top-k
// always uses dense accumulators (it extracts from every document's key).
enum class OrMethod { kTiles, kTilesUnstaged, kDenseAccumulators };

}  // namespace warp::gpu
