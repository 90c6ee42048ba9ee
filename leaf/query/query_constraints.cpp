#include "leaf/query/query_constraints.hpp"

#include <algorithm>
#include <memory>

namespace warp {
namespace {

// Calls `each(doc)` for every document of `index` whose lists hold all of `terms` (none when a
// term is not in the partition): the shortest list proposes, the others skip to it.
template <typename Each>
void for_each_holding_all(const std::vector<std::string>& terms, const IndexView& index, CursorStats* stats,
                          Each each) {
  std::vector<std::unique_ptr<PostingCursor>> cursors;
  for (const std::string& term : terms) {
    const TermInfo* info = index.find(term);
    if (info == nullptr) return;
    // Only docIDs are read: no norms, no scoring.
    cursors.push_back(
        std::make_unique<PostingCursor>(index.list(term, *info), nullptr, index.meta.doc_begin, TermScoring{}, stats));
  }
  if (cursors.empty()) return;
  std::sort(cursors.begin(), cursors.end(), [](const auto& a, const auto& b) { return a->size() < b->size(); });
  for (DocId candidate = cursors[0]->docid(); candidate != kEndDoc;) {
    bool all = true;
    for (size_t i = 1; i < cursors.size() && all; ++i) {
      cursors[i]->next_geq(candidate);
      if (cursors[i]->docid() != candidate) {
        all = false;
        cursors[0]->next_geq(cursors[i]->docid());
      }
    }
    if (all) {
      each(candidate);
      cursors[0]->next();
    }
    candidate = cursors[0]->docid();
  }
}

}  // namespace

std::vector<uint8_t> constraint_mask(const Query& query, const IndexView& index, std::span<const uint8_t> deleted,
                                     CursorStats* stats) {
  if (!query.constrained()) return {};
  CursorStats unused;
  if (stats == nullptr) stats = &unused;
  const DocId begin = index.meta.doc_begin;
  std::vector<uint8_t> mask(index.doc_count(), query.required.empty() ? 0 : 1);
  if (!query.required.empty()) {
    for_each_holding_all(query.required, index, stats, [&](DocId doc) { mask[doc - begin] = 0; });
  }
  for (const std::vector<std::string>& group : query.excluded) {
    for_each_holding_all(group, index, stats, [&](DocId doc) { mask[doc - begin] = 1; });
  }
  for (size_t d = 0; d < deleted.size() && d < mask.size(); ++d) mask[d] |= deleted[d];
  return mask;
}

}  // namespace warp
