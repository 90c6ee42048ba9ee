// MaxScore (Turtle & Flood 1995, in PISA's DAAT form): lists sorted by their maximum score; once
// the top-k threshold exceeds the summed maxima of the lowest lists, those become non-essential:
// they no longer propose candidates and are probed (next_geq) only while the candidate can still
// enter the top-k.
#include <algorithm>

#include "leaf/query/algorithms.hpp"

namespace warp {

void maxscore_query(std::vector<PostingCursor*> cursors, TopkQueue& topk) {
  if (cursors.empty()) return;
  std::sort(cursors.begin(), cursors.end(), [](auto* a, auto* b) { return a->max_score() < b->max_score(); });
  std::vector<Score> upper_bounds(cursors.size());  // sum of max scores of lists 0..i
  Score running = 0;
  for (size_t i = 0; i < cursors.size(); ++i) upper_bounds[i] = running += cursors[i]->max_score() * kBoundSlack;

  size_t non_essential = 0;
  DocId current = kEndDoc;
  for (PostingCursor* cursor : cursors) current = std::min(current, cursor->docid());

  while (non_essential < cursors.size() && current != kEndDoc) {
    Score score = 0;
    DocId next = kEndDoc;
    for (size_t i = non_essential; i < cursors.size(); ++i) {
      if (cursors[i]->docid() == current) {
        score += cursors[i]->score();
        cursors[i]->next();
      }
      next = std::min(next, cursors[i]->docid());
    }
    for (size_t i = non_essential; i-- > 0;) {
      if (!topk.would_enter(score + upper_bounds[i])) break;
      cursors[i]->next_geq(current);
      if (cursors[i]->docid() == current) score += cursors[i]->score();
    }
    if (topk.insert(score, current)) {
      while (non_essential < cursors.size() && !topk.would_enter(upper_bounds[non_essential])) ++non_essential;
    }
    current = next;
  }
}

}  // namespace warp
