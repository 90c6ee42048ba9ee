// The GPU top-k selection methods (topk_select.cuh implements them). Host-only header.
#pragma once

namespace warp::gpu {

// kBucketSelect: count keys into buckets, keep the bucket of the k-th and above, sort those.
// kMaxTree: Ding et al. 2009 §8.2, a multi-level max structure of degree 32 extracted k times.
enum class TopkMethod { kBucketSelect, kMaxTree };

}  // namespace warp::gpu
