// Builds the partitions of one generation in memory from documents: analysis, inversion,
// collection-wide statistics, a split into P contiguous docID ranges balanced by postings, and
// encoding with one codec. Single-threaded; the indexer service's parallel pipeline produces the
// same partitions from the same documents.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "common/index/doc_columns.hpp"
#include "common/index/index_view.hpp"

namespace warp {

struct SourceDocument {
  std::string external_id;
  std::string title;
  std::string body;
  std::string url;
  // The document as it came, a JSON object (a JSONL line, a write through the API); empty for
  // TREC and WARC input, whose stored form is made of the fields (stored_source).
  std::string source;
};

struct DocumentRecord {
  std::string external_id;
  std::string title;
  std::string url;
  uint32_t length = 0;  // analyzed terms
  // Its stored form (common/index/stored_source.hpp): written to the partition's stored family,
  // never held in a leaf's memory. Empty: nothing stored.
  std::string source;
};

struct BuildOptions {
  uint32_t partitions = 1;
  std::string codec = "bp128";
  AnalyzerConfig analyzer;
  Bm25Params bm25;
  uint64_t generation = 1;
  bool store = true;  // documents' stored forms kept in the partitions (fetch, snippets)
  // Keyword and numeric fields kept as columns (doc_columns.hpp), read from each document's JSON
  // form (DocumentRecord::source, which a build then holds while it runs even without `store`).
  ColumnSchema columns;
  // Word positions kept (word_positions.hpp), made from each document's stored form (so a build
  // then holds those too). Off here: documents added as terms (synthetic collections, tests) have
  // no text to take them from; warp-indexer turns them on unless --no-positions.
  bool positions = false;
  bool keeps_sources() const { return store || !columns.empty() || positions; }
};

struct BuiltPartition {
  IndexView view;
  std::vector<DocumentRecord> documents;  // by doc - view.meta.doc_begin
};

class IndexBuilder {
 public:
  explicit IndexBuilder(BuildOptions options);

  // Analyzes title and body (the title counts once, like any other text) and assigns the next
  // global docID, which is returned.
  DocId add_document(const SourceDocument& document);
  // Adds an already analyzed document (synthetic collections, tests).
  DocId add_analyzed(DocumentRecord record, std::span<const std::string> terms);
  // Adds a document given as its terms, each once, with their frequencies (a logged write's form);
  // its length is record.length. The same postings as add_analyzed of the terms repeated.
  DocId add_counted(DocumentRecord record, std::span<const std::pair<std::string, uint32_t>> term_freqs);

  size_t document_count() const { return documents_.size(); }
  std::vector<BuiltPartition> build() const;

 private:
  BuildOptions options_;
  Analyzer analyzer_;
  std::unordered_map<std::string, uint32_t> term_ids_;
  std::vector<std::string> terms_;
  std::vector<std::vector<Posting>> postings_;  // by term id, docIDs ascending
  std::vector<DocumentRecord> documents_;
  std::vector<uint32_t> distinct_terms_;  // per document, for balancing partitions
  std::vector<std::string> scratch_terms_;
};

// Calls its argument once for every term with the term's postings (docIDs ascending).
using TermVisitor = std::function<void(const std::string& term, std::span<const Posting> postings)>;
using ForEachTerm = std::function<void(const TermVisitor&)>;

// Builds the P partitions of a generation from inverted lists over `documents` (docIDs dense from
// 0): statistics, a split balanced by postings (`distinct_terms[d]` postings of document d), BM25
// block maxima, encoding. Shared by IndexBuilder and the indexer's parallel pipeline, so both give
// the same partitions for the same documents. `for_each_term` is called once per partition.
std::vector<BuiltPartition> build_partitions(const BuildOptions& options, const std::vector<DocumentRecord>& documents,
                                             std::span<const uint32_t> distinct_terms,
                                             const ForEachTerm& for_each_term);

// The metadata of partition `partition` of a generation split at `bounds` (P+1 docIDs).
PartitionMeta partition_meta(const BuildOptions& options, uint32_t partition, std::span<const DocId> bounds,
                             const CollectionStats& stats);

// What the encoder keeps of a term's best in one partition besides its list, for the OR's floor.
struct TermBests {
  std::vector<Posting> tops;       // its kTermTops best postings (TermInfo::tops), or none
  std::vector<Score> rank_floors;  // one for each of kRankFloors its list reaches (TermInfo::ranks)
};

// Encodes one partition's part of each term's list: the postings in [meta.doc_begin, doc_end),
// scored with the partition's length norms and the collection's statistics (meta.stats), block
// maxima included. The one encoder of both builds: the in-memory build_partitions and the
// indexer's out-of-core back end, so their partitions are identical.
class PartitionEncoder {
 public:
  // `doc_lengths`: of the partition's documents, by doc - meta.doc_begin.
  PartitionEncoder(const PartitionMeta& meta, std::span<const uint32_t> doc_lengths);
  // Encodes the slice of `all` (the term's postings over the whole collection, docIDs ascending)
  // into `words` (replaced) and fills info's df, cf and words; false when the partition holds none
  // of them. Returns the number of postings encoded in `postings`.
  // Thread-safe: one encoder per partition serves every thread of a parallel build.
  // `bests` (optional): the slice's best postings and rank floors (TermBests).
  bool encode(std::span<const Posting> all, TermInfo& info, std::vector<uint32_t>& words, uint64_t& postings,
              TermBests* bests = nullptr) const {
    return encode(all, collection_frequency(all), info, words, postings, bests);
  }
  // The same with the term's collection frequency (its postings' frequencies summed) given: a
  // builder encoding one list for several partitions sums them once, not once a partition.
  bool encode(std::span<const Posting> all, uint64_t cf, TermInfo& info, std::vector<uint32_t>& words,
              uint64_t& postings, TermBests* bests = nullptr) const;
  static uint64_t collection_frequency(std::span<const Posting> all);
  const PartitionMeta& meta() const { return meta_; }

 private:
  PartitionMeta meta_;
  const Codec& codec_;
  std::vector<float> length_norms_;
};

// `slice`'s kTermTops best postings by `scores` (one a posting), best first, ties to the smaller
// docID; none where it holds fewer (TermInfo::tops).
void best_postings(std::span<const Posting> slice, std::span<const Score> scores, std::vector<Posting>& tops);
// The slice's TermBests from its postings' scores and its encoded list (`words`, whose block maxima
// the rank floors start from): PartitionEncoder's, for views built otherwise.
void select_term_bests(std::span<const Posting> slice, std::span<const Score> scores, std::span<const uint32_t> words,
                       TermBests& bests);
// Appends a term's bests to the view's arrays (term_tops, term_rank_floors) and points `info` at them.
void keep_term_bests(IndexView& view, TermInfo& info, const TermBests& bests);

// The docID boundaries (P+1 values) that split documents into P contiguous ranges of about equal
// postings; `weights[d]` is document d's number of postings.
std::vector<DocId> balanced_boundaries(std::span<const uint32_t> weights, uint32_t parts);

}  // namespace warp
