// A forward cursor over one posting list, decoding a block at a time; the interface every query
// algorithm is written against (next, next_geq, docid, freq, score, and the block-max "shallow"
// moves of BlockMax-WAND). Block skipping: next_geq jumps over blocks whose last docID is below
// the target without decoding them.
#pragma once
#include <memory>
#include <vector>

#include "common/index/bm25.hpp"
#include "common/index/posting_list.hpp"
#include "leaf/query/term_scoring.hpp"

namespace warp {

struct CursorStats {
  uint64_t blocks_decoded = 0;    // doc blocks decoded (frequency blocks are decoded on demand)
  uint64_t blocks_total = 0;      // blocks in the lists the query opened
  uint64_t postings_decoded = 0;  // docIDs decoded
};

class PostingCursor {
 public:
  // `length_norms` is indexed by doc - doc_begin; `scoring` gives the term's weight in score units
  // and the scale of the list's stored bounds (query_processor.hpp).
  PostingCursor(const PostingListView& list, const float* length_norms, DocId doc_begin, TermScoring scoring,
                CursorStats* stats);

  DocId docid() const { return doc_; }
  uint32_t size() const { return list_.count; }
  void next() {
    if (++position_ < block_docs_) {
      doc_ = docs_[position_];
    } else {
      advance_block(block_ + 1);
    }
  }
  void next_geq(DocId target);
  TermFreq freq();
  // Scores and bounds are in the query's score units (bm25.hpp): integer-valued floats.
  Score score() { return bm25_units(scoring_.unit_weight, freq(), length_norms_[doc_ - doc_begin_]); }
  Score max_score() const { return max_score_; }

  // Block-max access at a position independent of the cursor: moves the shallow block forward to
  // the first block whose last docID is >= target (BlockMax-WAND, Ding & Suel 2011).
  void shallow_next_geq(DocId target) {
    while (shallow_block_ < list_.block_count && list_.block_last_docid[shallow_block_] < target) ++shallow_block_;
  }
  Score shallow_block_max() const {
    return shallow_block_ < list_.block_count
               ? bm25_unit_bound(list_.block_max_score[shallow_block_], scoring_.bound_scale)
               : 0;
  }
  DocId shallow_block_last() const {
    return shallow_block_ < list_.block_count ? list_.block_last_docid[shallow_block_] : kEndDoc;
  }
  // The bound of every posting the list may hold in [begin, end): the largest maximum of the blocks
  // that overlap the range (0 past the list's end). Moves the shallow block to the first block
  // whose last docID is >= begin.
  Score shallow_range_max(DocId begin, DocId end);
  DocId last_docid() const { return list_.block_count ? list_.block_last_docid[list_.block_count - 1] : kEndDoc; }

  // Adds the score of every posting in [begin, end) to acc[doc - begin] and sets bit doc - begin of
  // `touched` (tiled OR); leaves the cursor on its first docID >= end.
  void accumulate(DocId begin, DocId end, Score* acc, uint64_t* touched);

 private:
  void advance_block(uint32_t block);

  PostingListView list_;
  const float* length_norms_;
  DocId doc_begin_;
  TermScoring scoring_;
  Score max_score_;
  CursorStats* stats_;
  std::unique_ptr<BlockDecoder> doc_decoder_;
  std::unique_ptr<BlockDecoder> freq_decoder_;
  std::vector<uint32_t> docs_;
  std::vector<uint32_t> freqs_;
  uint32_t block_ = 0;
  uint32_t block_docs_ = 0;
  uint32_t position_ = 0;
  uint32_t freq_block_ = ~0u;  // the block whose frequencies are decoded
  uint32_t shallow_block_ = 0;
  DocId doc_ = kEndDoc;
};

}  // namespace warp
