#include "leaf/query/posting_cursor.hpp"

namespace warp {

PostingCursor::PostingCursor(const PostingListView& list, const float* length_norms, DocId doc_begin,
                             TermScoring scoring, CursorStats* stats)
    : list_(list),
      length_norms_(length_norms),
      doc_begin_(doc_begin),
      scoring_(scoring),
      max_score_(bm25_unit_bound(list.max_score, scoring.bound_scale)),
      stats_(stats),
      doc_decoder_(list.codec->decoder(list.docs)),
      freq_decoder_(list.freq_codec->decoder(list.freqs)),
      docs_(list.codec->block_size()),
      freqs_(list.codec->block_size()) {
  stats_->blocks_total += list.block_count;
  advance_block(0);
}

void PostingCursor::advance_block(uint32_t block) {
  block_ = block;
  position_ = 0;
  if (block >= list_.block_count) {
    block_docs_ = 0;
    doc_ = kEndDoc;
    return;
  }
  const uint32_t block_size = list_.codec->block_size();
  block_docs_ = std::min(block_size, list_.count - block * block_size);
  doc_decoder_->decode_block(block, docs_.data());
  DocId previous = block == 0 ? kEndDoc : list_.block_last_docid[block - 1];
  for (uint32_t i = 0; i < block_docs_; ++i) docs_[i] = previous = previous + docs_[i] + 1;
  doc_ = docs_[0];
  stats_->blocks_decoded += 1;
  stats_->postings_decoded += block_docs_;
}

void PostingCursor::next_geq(DocId target) {
  if (doc_ >= target) return;
  if (list_.block_last_docid[block_] < target) {
    uint32_t block = block_ + 1;
    while (block < list_.block_count && list_.block_last_docid[block] < target) ++block;
    advance_block(block);
    if (doc_ >= target) return;
  }
  // The target lies in the current block: its last docID is >= target.
  while (docs_[position_] < target) ++position_;
  doc_ = docs_[position_];
}

TermFreq PostingCursor::freq() {
  if (freq_block_ != block_) {
    freq_decoder_->decode_block(block_, freqs_.data());
    freq_block_ = block_;
  }
  return freqs_[position_] + 1;
}

}  // namespace warp
