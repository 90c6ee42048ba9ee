// Ranked conjunctive DAAT: lists from shortest to longest; the shortest proposes a candidate,
// the others next_geq to it (skipping whole blocks through their last docIDs); a mismatch makes
// the larger docID the new candidate.
#include <algorithm>

#include "leaf/query/algorithms.hpp"

namespace warp {

uint64_t and_query(std::vector<PostingCursor*> cursors, TopkQueue& topk) {
  if (cursors.empty()) return 0;
  std::sort(cursors.begin(), cursors.end(), [](auto* a, auto* b) { return a->size() < b->size(); });
  uint64_t matches = 0;
  DocId candidate = cursors[0]->docid();
  size_t i = 1;
  while (candidate != kEndDoc) {
    for (; i < cursors.size(); ++i) {
      cursors[i]->next_geq(candidate);
      if (cursors[i]->docid() != candidate) {
        candidate = cursors[i]->docid();
        i = 0;
        break;
      }
    }
    if (i == cursors.size()) {
      matches += topk.masked(candidate) ? 0 : 1;
      Score score = 0;
      for (PostingCursor* cursor : cursors) score += cursor->score();
      topk.insert(score, candidate);
      cursors[0]->next();
      candidate = cursors[0]->docid();
      i = 1;
    }
  }
  return matches;
}

}  // namespace warp
