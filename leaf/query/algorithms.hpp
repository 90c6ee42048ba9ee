// Document-at-a-time query algorithms over posting cursors, one per file (PISA's layout):
// and_query.cpp, maxscore_query.cpp, block_max_wand_query.cpp, tiled_or_query.cpp, required_or_query.cpp. Each fills
// `topk` with the exact BM25 top-k of its mode; the cursors hold one distinct term each.
#pragma once
#include <vector>

#include "leaf/query/posting_cursor.hpp"
#include "leaf/query/topk_queue.hpp"

namespace warp {

// Upper bounds are summed in another order than the scores they bound, so float rounding could
// make a bound a hair lower than the score; the slack keeps pruning safe.
inline constexpr float kBoundSlack = 1.0f + 1e-5f;

// Conjunctive: returns the number of documents that contain every term.
uint64_t and_query(std::vector<PostingCursor*> cursors, TopkQueue& topk);
// Disjunctive, exact, with MaxScore pruning (Turtle & Flood 1995).
void maxscore_query(std::vector<PostingCursor*> cursors, TopkQueue& topk);
// Disjunctive, exact, with BlockMax-WAND over the per-block maxima (Ding & Suel 2011).
void block_max_wand_query(std::vector<PostingCursor*> cursors, TopkQueue& topk);
// Disjunctive, exact: MaxScore over docID tiles scored term-at-a-time (tiled_or_query.cpp).
void tiled_or_query(std::vector<PostingCursor*> cursors, TopkQueue& topk);
// Disjunctive with required terms, exact: documents holding every `required` term, scored with the
// `optional` terms they hold too (required_or_query.cpp).
void required_or_query(std::vector<PostingCursor*> required, std::vector<PostingCursor*> optional, TopkQueue& topk);

}  // namespace warp
