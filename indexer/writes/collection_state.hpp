// What BM25 needs of the whole collection at the head of the write log: N, the sum of document
// lengths, every term's document frequency, and each document's distinct terms (for the df a
// replacement or a delete takes away). Built from a generation (its partitions' lists inverted
// into each document's terms) and advanced by every logged op in order, each giving the
// LoggedWrite that leaves apply (common/index/logged_write.hpp). Memory: 4 bytes a posting of the
// collection plus each document's id; the inversion reads every list once.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "common/index/index_view.hpp"
#include "common/index/logged_write.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp::writes {

// A put's document as a build analyzes it (title, then body): what apply needs besides the op.
// Made by CollectionState::analyze, which may run on several threads at once between applies
// (the tail analyzes a batch of puts in parallel and applies them in order).
struct AnalyzedPut {
  static constexpr uint32_t kNewTerm = UINT32_MAX;
  bool ok = false;  // the document is a JSON object
  std::string title, url;
  std::vector<std::pair<std::string, uint32_t>> terms;  // distinct, sorted, with their frequencies
  std::vector<uint32_t> term_ids;                       // by terms: the state's id, or kNewTerm
  uint32_t length = 0;                                  // analyzed terms
  std::vector<uint32_t> tokens;                         // the words in order, as indexes into terms
  uint32_t title_tokens = 0;                            // of them, the title's
};

class CollectionState {
 public:
  explicit CollectionState(const AnalyzerConfig& analyzer);
  // Replaces the state by the collection of the generation in `dir` (every partition). Throws Error.
  void load_generation(const std::string& dir);
  void clear();  // an empty collection
  // Applies one logged op and says what it did. A put whose document is not a JSON object with
  // string fields (the broker lets none through) changes nothing: `ok` false.
  LoggedWrite apply(uint64_t sequence, const WriteOp& op, bool* ok = nullptr);
  // A put's document analyzed with `analyzer` (the caller's own), its terms' ids looked up: reads
  // the state only, so several threads may analyze at once while nothing is applied.
  AnalyzedPut analyze(Analyzer& analyzer, const WriteOp& op) const;
  // The same with the put's document analyzed already (analyze of op, with no clear or
  // load_generation since; ignored for a delete).
  LoggedWrite apply(uint64_t sequence, const WriteOp& op, AnalyzedPut analyzed, bool* ok = nullptr);
  uint64_t doc_count() const { return docs_.size(); }
  uint64_t total_length() const { return total_length_; }
  uint64_t df(const std::string& term) const;

 private:
  struct Doc {
    uint32_t length = 0;
    std::vector<uint32_t> terms;  // distinct, by term id
  };
  uint32_t term_id(const std::string& term);
  Analyzer analyzer_;
  std::unordered_map<std::string, uint32_t, TermHash, std::equal_to<>> term_ids_;
  std::vector<std::string> terms_;
  std::vector<uint64_t> df_;  // by term id
  std::unordered_map<std::string, Doc, TermHash, std::equal_to<>> docs_;
  uint64_t total_length_ = 0;
  std::vector<std::pair<uint32_t, int32_t>> change_;  // scratch: (term id, df delta) by term id
};

}  // namespace warp::writes
