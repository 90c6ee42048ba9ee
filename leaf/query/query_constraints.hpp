// The documents a query's constraints leave it on one partition (Query::required, excluded and
// the phrases, from the query syntax, and Query::filter over the partition's columns), found from
// the constraint words' posting lists, the phrases' word positions (phrase_docs.hpp) and the
// filter's columns before the query runs: where words or phrases are required, the documents allowed; else the
// documents kept out (with a filter, whichever of the two is smaller). Every processor and algorithm then honours them
// while it ranks, as it honours the overlay's deletions: the CPU's top-k queue through a bitset,
// the GPU through norms of the query's own, infinite where a document is kept out
// (leaf/gpu/index/constrained_norms.cuh). A filter during query processing, not after it: the top
// k answered is the true top k of the documents allowed.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "common/index/index_view.hpp"
#include "common/query/query.hpp"
#include "leaf/query/posting_cursor.hpp"

namespace warp {

struct ConstraintDocs {
  bool allowed = false;     // `docs` are the only documents allowed; else the documents kept out
  std::vector<DocId> docs;  // global docIDs, sorted, distinct
  // With a filter: the documents kept out as a bit each (doc - doc_begin), instead of `docs` (a
  // filter may keep out most of a partition: its bits are smaller than their docIDs).
  std::vector<uint64_t> kept_out;
};

// The documents of `index` whose lists hold all of `terms` (none when a term is not in the
// partition), docIDs only: the shortest list proposes, the others skip to it through their blocks.
std::vector<DocId> holding_all(const std::vector<std::string>& terms, const IndexView& index, CursorStats* stats);

// Nothing when the query has no constraints. Decoding the lists is counted into `stats`.
// `required` false leaves the required words out (where the caller holds them otherwise; phrases
// are kept). Throws Error for phrases on an index without word positions.
std::optional<ConstraintDocs> constraint_docs(const Query& query, const IndexView& index, bool required = true,
                                              CursorStats* stats = nullptr);

// A bit per document of `index` (doc - doc_begin), set where `docs` keeps it out (its own bits,
// moved, where it has them).
std::vector<uint64_t> kept_out_bits(ConstraintDocs docs, const IndexView& index);

}  // namespace warp
