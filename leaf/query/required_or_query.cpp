// Disjunctive with required terms (the query syntax's +word in OR mode): only documents holding
// every required term can be answered. MaxScore's split with the required lists always in: while
// the required lists' bounds and the smallest optional ones together cannot lift a document into
// the queue, a document must hold one of the other optional terms to enter, and those (rarer)
// lists propose the candidates, the required lists skipping to them through their blocks; before
// that, the required lists propose (the shortest first, the others skipping to it) and their
// blocks that cannot lift a document in are skipped whole. At each match the optional terms are
// probed, the highest bounds first, while the score they could still add lets it enter.
#include <algorithm>

#include "leaf/query/algorithms.hpp"

namespace warp {

void required_or_query(std::vector<PostingCursor*> required, std::vector<PostingCursor*> optional, TopkQueue& topk) {
  if (required.empty()) return;
  std::sort(required.begin(), required.end(), [](auto* a, auto* b) { return a->size() < b->size(); });
  // Ascending bounds: optional[0..split) are the lists a candidate need not hold.
  std::sort(optional.begin(), optional.end(), [](auto* a, auto* b) { return a->max_score() < b->max_score(); });
  const size_t m = optional.size();
  std::vector<Score> below(m + 1, 0);  // below[j]: the bounds of optional[0..j) (what a probe from the top leaves)
  for (size_t j = 0; j < m; ++j) below[j + 1] = below[j] + optional[j]->max_score();
  Score required_bound = 0;
  for (PostingCursor* cursor : required) required_bound += cursor->max_score();

  DocId next = 0;  // every document below has been considered
  while (true) {
    // The most optional lists a candidate may lack: none while the required lists alone could
    // lift a document in (-1), all of them when nothing can enter any more (m: done).
    ptrdiff_t split = -1;
    if (topk.full()) {
      while (split < static_cast<ptrdiff_t>(m) &&
             !topk.would_enter((required_bound + below[static_cast<size_t>(split + 1)]) * kBoundSlack))
        ++split;
    }
    if (split == static_cast<ptrdiff_t>(m)) return;
    DocId candidate = kEndDoc;
    if (split < 0) {
      required[0]->next_geq(next);
      candidate = required[0]->docid();
      if (candidate == kEndDoc) return;
      if (topk.full()) {  // the required lists' blocks around it
        Score bound = below[m];
        DocId block_end = kEndDoc;
        for (PostingCursor* cursor : required) {
          cursor->shallow_next_geq(candidate);
          bound += cursor->shallow_block_max();
          block_end = std::min(block_end, cursor->shallow_block_last());
        }
        if (!topk.would_enter(bound * kBoundSlack)) {
          if (block_end == kEndDoc) return;
          next = block_end + 1;
          continue;
        }
      }
    } else {
      for (size_t j = static_cast<size_t>(split); j < m; ++j) {
        optional[j]->next_geq(next);
        candidate = std::min(candidate, optional[j]->docid());
      }
      if (candidate == kEndDoc) return;
    }
    // Every required list at the candidate, or the first document past it they could all hold.
    bool all = true;
    for (PostingCursor* cursor : required) {
      cursor->next_geq(candidate);
      if (cursor->docid() != candidate) {
        all = false;
        next = cursor->docid();
        break;
      }
    }
    if (!all) {
      if (next == kEndDoc) return;
      continue;
    }
    next = candidate + 1;
    if (topk.masked(candidate)) continue;
    Score score = 0;
    for (PostingCursor* cursor : required) score += cursor->score();
    bool may_enter = true;
    for (size_t j = m; j-- > 0 && may_enter;) {
      may_enter = topk.would_enter((score + below[j + 1]) * kBoundSlack);
      if (!may_enter) break;
      optional[j]->next_geq(candidate);
      if (optional[j]->docid() == candidate) score += optional[j]->score();
    }
    if (may_enter) topk.insert(score, candidate);
  }
}

}  // namespace warp
