// The in-memory view of one partition that query processors read: lexicon, posting lists in one
// arena of 32-bit words (one upload to the GPU), document lengths and their BM25 norms.
// Built by IndexBuilder or loaded from disk by open_partition; the same view either way.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/index/bm25.hpp"
#include "common/index/doc_columns.hpp"
#include "common/index/posting_list.hpp"
#include "common/index/word_positions.hpp"

namespace warp {

// 2: lexicon rows may hold their term's rank floors (TermInfo::ranks) after its best postings,
// which a reader of version 1 refuses. This build reads both.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;

struct PartitionMeta {
  uint32_t format_version = kFormatVersion;
  std::string analyzer_version;
  uint64_t generation = 1;
  uint32_t partition_id = 0;
  uint32_t partition_count = 1;
  DocId doc_begin = 0;  // global docID range [doc_begin, doc_end)
  DocId doc_end = 0;
  std::string codec;
  Bm25Params bm25;        // parameters the stored block maxima were computed with
  CollectionStats stats;  // collection-wide, identical in every partition of a generation
  uint64_t posting_count = 0;
};

// A term's best postings in a partition by its BM25 score alone, kTermTops of them (for a term
// with at least that many there), best first. The k-th best of them, scored as a query scores the
// term, is a floor under the k-th best score of any OR query holding the term, for k up to
// kTermTops: each of those documents scores at least its score for this term. The CPU's OR starts
// its top-k with that floor instead of nothing (leaf/query/cpu_query_processor.cpp). Written by the
// encoder (PartitionEncoder), stored after the lexicon row's fields; partitions written before
// have none, and an older reader skips them.
inline constexpr uint32_t kTermTops = 10;
inline constexpr uint32_t kNoTermTops = 0xFFFFFFFFu;

// The same floor for larger k, from scores instead of postings: a term's rank floors are, for each
// rank r of kRankFloors its list in the partition reaches, a score that at least r of its postings
// reach (in the index's BM25, the units of the stored block maxima), within a 256th of the range
// counted below its r-th best (compute_rank_floors below). The smallest rank at or past k gives a
// floor for k past kTermTops. Computed with the index's k1 and b, and again by IndexView::rescore
// for others. Stored after the best postings (format version 2).
inline constexpr std::array<uint32_t, 6> kRankFloors{20, 50, 100, 200, 500, 1000};
// A list's rank floors from its postings' scores (TermInfo::ranks), never above the r-th best: one
// pass counting the postings into 256 buckets from a low end up to the list's maximum, a rank's
// floor the lower edge of the bucket where the count from the top reaches it. The low end is 0, or
// with `block_maxima` (the encoded list's, of blocks of `block_size` postings; optional) and at
// least R blocks for R the largest rank wanted, the R-th largest block maximum (R postings reach
// it, one a block): a long list's pass then counts only the postings of the blocks reaching it,
// about R blocks whatever its length. Each bucket's smallest score kept too, or each rank selected
// exactly, cost the encoder 4-28 ns a posting on the development VM.
void compute_rank_floors(std::span<const Score> scores, std::span<const Score> block_maxima, size_t block_size,
                         std::vector<Score>& floors);

struct TermInfo {
  uint32_t df = 0;              // collection-wide document frequency
  uint64_t cf = 0;              // collection-wide term frequency
  uint64_t offset = 0;          // list position in IndexView::postings, in words
  uint32_t words = 0;           // list size in words
  uint32_t tops = kNoTermTops;  // its kTermTops best postings at IndexView::term_tops[tops], or none
  uint32_t ranks = 0;           // its rank floors at IndexView::term_rank_floors[ranks], rank_count of them
  uint32_t rank_count = 0;      // (kRankFloors[i] for i < rank_count)
};

// The lexicon's hash, for lookups by std::string_view as well as std::string (heterogeneous lookup).
struct TermHash {
  using is_transparent = void;
  size_t operator()(std::string_view term) const noexcept { return std::hash<std::string_view>{}(term); }
};

struct IndexView {
  PartitionMeta meta;
  std::unordered_map<std::string, TermInfo, TermHash, std::equal_to<>> lexicon;
  std::vector<uint32_t> postings;     // lists back to back, then kReadPaddingWords words
  std::vector<uint32_t> doc_lengths;  // by doc - meta.doc_begin
  std::vector<float> length_norms;    // bm25_length_norm of each document, for meta.bm25
  std::vector<std::string> external_ids;
  std::vector<Posting> term_tops;       // TermInfo::tops: kTermTops postings a term, best first
  std::vector<Score> term_rank_floors;  // TermInfo::ranks: a term's floors at kRankFloors
  // The keyword and numeric fields' values (doc_columns.hpp), by doc - meta.doc_begin; null: the
  // index declares none.
  std::shared_ptr<const DocColumns> columns;
  // Where each term occurs in each document (word_positions.hpp), for phrases; null: not kept.
  std::shared_ptr<const WordPositions> positions;

  // Looked up by its text wherever it lives (a request's bytes too): no string is made for it.
  const TermInfo* find(std::string_view term) const {
    auto it = lexicon.find(term);
    return it == lexicon.end() ? nullptr : &it->second;
  }
  // The term's kTermTops best postings, or an empty span.
  std::span<const Posting> tops(const TermInfo& info) const {
    if (info.tops == kNoTermTops) return {};
    return {term_tops.data() + info.tops, kTermTops};
  }
  // The term's rank floors, one for each of the first kRankFloors its list reaches (maybe none).
  std::span<const Score> rank_floors(const TermInfo& info) const {
    return {term_rank_floors.data() + info.ranks, info.rank_count};
  }
  PostingListView list(const std::string& term, const TermInfo& info) const {
    return PostingListView::parse(postings.data() + info.offset, info.words, term);
  }
  uint32_t doc_count() const { return meta.doc_end - meta.doc_begin; }

  // Fills length_norms for meta.bm25 and the collection statistics.
  void compute_length_norms();
  // Takes other BM25 parameters, rescoring every list's block maxima for a k1 or b other than the
  // index's (the stored bounds would not be upper bounds otherwise).
  void rescore(const Bm25Params& params);
};

}  // namespace warp
