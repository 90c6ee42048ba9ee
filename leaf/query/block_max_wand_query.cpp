// BlockMax-WAND (Ding & Suel, SIGIR 2011; PISA's block_max_wand_query): WAND finds a pivot whose
// summed list maxima can beat the threshold; the per-block maxima of the lists up to the pivot
// then either confirm the pivot (score it, or move a list to it) or rule out the whole block
// range, skipping to the first docID past the smallest block end.
#include <algorithm>

#include "leaf/query/algorithms.hpp"

namespace warp {
namespace {

void sort_by_docid(std::vector<PostingCursor*>& cursors) {
  std::sort(cursors.begin(), cursors.end(), [](auto* a, auto* b) { return a->docid() < b->docid(); });
}

// Restores docID order after cursors[position] moved forward.
void bubble_down(std::vector<PostingCursor*>& cursors, size_t position) {
  for (size_t i = position + 1; i < cursors.size() && cursors[i]->docid() < cursors[i - 1]->docid(); ++i) {
    std::swap(cursors[i], cursors[i - 1]);
  }
}

}  // namespace

void block_max_wand_query(std::vector<PostingCursor*> cursors, TopkQueue& topk) {
  if (cursors.empty()) return;
  sort_by_docid(cursors);
  for (;;) {
    // 1. Pivot: the first list at which the summed maxima could enter the top-k.
    Score upper_bound = 0;
    size_t pivot = 0;
    bool found = false;
    for (; pivot < cursors.size(); ++pivot) {
      if (cursors[pivot]->docid() == kEndDoc) break;
      upper_bound += cursors[pivot]->max_score() * kBoundSlack;
      if (topk.would_enter(upper_bound)) {
        found = true;
        break;
      }
    }
    if (!found) return;
    const DocId pivot_id = cursors[pivot]->docid();
    while (pivot + 1 < cursors.size() && cursors[pivot + 1]->docid() == pivot_id) ++pivot;

    // 2. Block-max check over the lists up to the pivot.
    Score block_bound = 0;
    for (size_t i = 0; i <= pivot; ++i) {
      cursors[i]->shallow_next_geq(pivot_id);
      block_bound += cursors[i]->shallow_block_max() * kBoundSlack;
    }
    if (topk.would_enter(block_bound)) {
      if (cursors[0]->docid() == pivot_id) {
        Score score = 0;
        for (size_t i = 0; i <= pivot; ++i) {
          score += cursors[i]->score();
          cursors[i]->next();
        }
        topk.insert(score, pivot_id);
        sort_by_docid(cursors);
      } else {
        // Move the last list before the pivot's docID up to it.
        size_t list = pivot;
        while (cursors[list]->docid() == pivot_id) --list;
        cursors[list]->next_geq(pivot_id);
        bubble_down(cursors, list);
      }
      continue;
    }

    // 3. Skip: no document up to the end of the smallest block can enter.
    size_t list = 0;
    for (size_t i = 1; i <= pivot; ++i) {
      if (cursors[i]->max_score() > cursors[list]->max_score()) list = i;
    }
    DocId next = kEndDoc;
    for (size_t i = 0; i <= pivot; ++i) next = std::min(next, cursors[i]->shallow_block_last());
    next = next == kEndDoc ? kEndDoc : next + 1;
    if (pivot + 1 < cursors.size() && cursors[pivot + 1]->docid() < next) next = cursors[pivot + 1]->docid();
    if (next <= pivot_id) next = pivot_id + 1;
    cursors[list]->next_geq(next);
    bubble_down(cursors, list);
  }
}

}  // namespace warp
