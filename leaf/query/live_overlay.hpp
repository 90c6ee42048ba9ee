// A partition's index as the writes after its generation leave it (the near-real-time path,
// leaf/live/): the collection's statistics now, the document frequencies that moved, the length
// norms for today's average length, and the documents replaced or deleted since. Query processors
// given one score with it instead of the view's own (PreparedQuery::live): the same float
// operations on the new statistics, so an answer equals that of a fresh build of the same
// documents. The view's stored bounds were computed with its own statistics; scaled by the ratio
// of the new idf to the stored one and by bound_growth they stay upper bounds.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index/index_builder.hpp"
#include "common/index/index_view.hpp"

namespace warp {

using DfMap = std::unordered_map<std::string, uint64_t, TermHash, std::equal_to<>>;

struct LiveOverlay {
  CollectionStats stats;  // collection-wide, now
  // The terms whose df moved since the generation, their df now: layers, the newest last.
  std::vector<std::shared_ptr<const DfMap>> df;
  std::vector<float> length_norms;  // the view's documents', for stats.average_length()
  std::vector<uint8_t> deleted;     // by doc - doc_begin (empty: none): replaced or deleted since
  // max(1, average length now / the view's): a term's score in a document grows by at most this
  // factor when the average length grows (its length norm shrinks by at most it).
  double bound_growth = 1;
  // Distinct for every overlay make_overlay makes (never reused in the process): what a device
  // copy of its norms is kept under (leaf/gpu/index/device_index.hpp).
  uint64_t serial = 0;

  // The term's df now: moved, or the view's.
  uint64_t df_of(std::string_view term, const TermInfo& info) const {
    for (auto layer = df.rbegin(); layer != df.rend(); ++layer) {
      auto it = (*layer)->find(term);
      if (it != (*layer)->end()) return it->second;
    }
    return info.df;
  }
};

// The documents written since a generation that one partition searches: an index of their own,
// their records, and the docID each has in the answers (after every docID of the generation).
// The index and the records are shared by the segment's copies with other docIDs (after a new
// generation, leaf/live/live_writes.cpp).
struct LiveSegment {
  std::shared_ptr<const IndexView> view;                       // null: no documents
  std::shared_ptr<const std::vector<DocumentRecord>> records;  // by doc of view
  // By doc of view, ascending; documents a newer generation holds (masked) all take the first
  // docID past that generation's, which no document searched has.
  std::vector<DocId> global;
  std::optional<DocumentRecord> document(DocId global_doc) const;
};

// The overlay of `view` at `stats` with the moved `df` (no deletions).
LiveOverlay make_overlay(const IndexView& view, const CollectionStats& stats,
                         std::vector<std::shared_ptr<const DfMap>> df);

}  // namespace warp
