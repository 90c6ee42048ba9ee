#include "common/index/bm25.hpp"

#include <string>

#include "common/util/status.hpp"

namespace warp {

void check_bm25_params(const Bm25Params& params) {
  if (!(params.k1 >= 0) || std::isinf(params.k1))
    throw Error("BM25 k1 must be a number >= 0, not " + std::to_string(params.k1));
  if (!(params.b >= 0 && params.b <= 1)) throw Error("BM25 b must be between 0 and 1, not " + std::to_string(params.b));
  if (!(params.k3 >= 0)) throw Error("BM25 k3 must be >= 0 or inf, not " + std::to_string(params.k3));
}

}  // namespace warp
