// Disjunctive with required terms (the query syntax's +word in OR mode): only documents holding
// every required term can be answered, so those lists drive as AND's do (the shortest proposes,
// the others skip to it through their blocks' last docIDs) and the optional terms are probed at
// each match, the highest bounds first, while the score they could still add lets the document
// enter; blocks of the required lists that cannot lift a document in are skipped whole. A
// `+rare common` query costs the rare list, not the common one.
#include <algorithm>

#include "leaf/query/algorithms.hpp"

namespace warp {

void required_or_query(std::vector<PostingCursor*> required, std::vector<PostingCursor*> optional, TopkQueue& topk) {
  if (required.empty()) return;
  std::sort(required.begin(), required.end(), [](auto* a, auto* b) { return a->size() < b->size(); });
  std::sort(optional.begin(), optional.end(), [](auto* a, auto* b) { return a->max_score() > b->max_score(); });
  std::vector<Score> rest(optional.size() + 1, 0);  // rest[i]: the bounds of optional[i..]
  for (size_t i = optional.size(); i-- > 0;) rest[i] = rest[i + 1] + optional[i]->max_score();
  DocId candidate = required[0]->docid();
  size_t i = 1;
  while (candidate != kEndDoc) {
    // A candidate the shortest list proposes: where the blocks of the required lists around it
    // together with every optional list cannot lift a document into the queue, none of their
    // documents up to the first of those blocks' ends can enter (BlockMax-WAND's skip).
    if (i == 1 && topk.full()) {
      Score bound = rest[0];
      DocId block_end = kEndDoc;
      for (PostingCursor* cursor : required) {
        cursor->shallow_next_geq(candidate);
        bound += cursor->shallow_block_max();
        block_end = std::min(block_end, cursor->shallow_block_last());
      }
      if (!topk.would_enter(bound * kBoundSlack)) {
        if (block_end == kEndDoc) break;
        required[0]->next_geq(block_end + 1);
        candidate = required[0]->docid();
        continue;
      }
    }
    for (; i < required.size(); ++i) {
      required[i]->next_geq(candidate);
      if (required[i]->docid() != candidate) {
        candidate = required[i]->docid();
        i = 0;
        break;
      }
    }
    if (i == required.size()) {
      if (!topk.masked(candidate)) {
        Score score = 0;
        for (PostingCursor* cursor : required) score += cursor->score();
        bool may_enter = true;
        for (size_t o = 0; o < optional.size() && may_enter; ++o) {
          may_enter = topk.would_enter((score + rest[o]) * kBoundSlack);
          if (!may_enter) break;
          optional[o]->next_geq(candidate);
          if (optional[o]->docid() == candidate) score += optional[o]->score();
        }
        if (may_enter) topk.insert(score, candidate);
      }
      required[0]->next();
      candidate = required[0]->docid();
      i = 1;
    }
  }
}

}  // namespace warp
