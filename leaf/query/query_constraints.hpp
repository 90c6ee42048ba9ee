// The documents a query's constraints keep out of its answer on one partition (Query::required and
// Query::excluded, from the query syntax): found from the constraint terms' lists before the query
// runs, then honoured as the overlay's deletions are, by every processor and algorithm while it
// ranks (the CPU's top-k mask; the GPU's per-query norms, infinite where kept out). A filter during
// query processing, not after it: the top k answered is the true top k of the documents allowed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "common/index/index_view.hpp"
#include "common/query/query.hpp"
#include "leaf/query/posting_cursor.hpp"

namespace warp {

// A byte per document of `index` (by doc - doc_begin): 1 where the query's constraints or
// `deleted` (LiveOverlay::deleted, possibly empty) keep it out. Empty when the query has no
// constraints (then `deleted` alone applies). Decoding the lists is counted into `stats`.
std::vector<uint8_t> constraint_mask(const Query& query, const IndexView& index, std::span<const uint8_t> deleted,
                                     CursorStats* stats = nullptr);

}  // namespace warp
