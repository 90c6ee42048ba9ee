// One term's posting list inside a partition: docIDs and frequencies compressed in blocks by one
// codec, with per block the last docID and a BM25 upper bound (block-max), and the codec's
// endpoints arrays. Stored as one array of 32-bit words so a list is one blob on disk and one
// contiguous range in host or GPU memory:
//
//   [count][codec][blocks][doc words][freq words][max score]
//   [block_last_docid × blocks][block_max_score × blocks]
//   [doc endpoints × blocks+1][freq endpoints × blocks+1][doc words][freq words]
//
// DocIDs are global. Doc gaps are `doc - previous - 1`, the previous doc of block 0 being -1 and
// that of block j the last docID of block j-1, so every block decodes on its own. Frequencies are
// stored minus one.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/codec/codec.hpp"
#include "common/index/types.hpp"

namespace warp {

struct Posting {
  DocId doc;
  TermFreq freq;
};

struct PostingListView {
  uint32_t count = 0;
  const Codec* codec = nullptr;       // of the docIDs
  const Codec* freq_codec = nullptr;  // of the frequencies: codec->frequency_codec()
  uint32_t block_count = 0;
  Score max_score = 0;
  const DocId* block_last_docid = nullptr;
  const Score* block_max_score = nullptr;
  EncodedView docs;
  EncodedView freqs;

  // Validates sizes against `word_count`; throws Error naming `term` when the blob is malformed.
  static PostingListView parse(const uint32_t* words, size_t word_count, const std::string& term);
};

// Encodes `postings` (sorted by doc, freq >= 1) without read padding: the memory holding the
// list must be followed by kReadPaddingWords readable words (IndexView::postings guarantees it).; `scores[i]` is the
// BM25 score of posting i and gives the block maxima and the list maximum.
std::vector<uint32_t> encode_posting_list(std::span<const Posting> postings, std::span<const Score> scores,
                                          const Codec& codec);
// The same into `words` (its capacity reused).
void encode_posting_list(std::span<const Posting> postings, std::span<const Score> scores, const Codec& codec,
                         std::vector<uint32_t>& words);

// Replaces the block maxima (and the list maximum) of an encoded list in place.
void rewrite_block_maxima(uint32_t* words, std::span<const Score> block_max);

// Decodes a whole list (tests, block-max recomputation).
std::vector<Posting> decode_posting_list(const PostingListView& list);

}  // namespace warp
