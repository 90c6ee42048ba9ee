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
#include "common/index/logged_write.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp::writes {

class CollectionState {
 public:
  explicit CollectionState(const AnalyzerConfig& analyzer);
  // Replaces the state by the collection of the generation in `dir` (every partition). Throws Error.
  void load_generation(const std::string& dir);
  void clear();  // an empty collection
  // Applies one logged op and says what it did. A put whose document is not a JSON object with
  // string fields (the broker lets none through) changes nothing: `ok` false.
  LoggedWrite apply(uint64_t sequence, const WriteOp& op, bool* ok = nullptr);
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
  std::unordered_map<std::string, uint32_t> term_ids_;
  std::vector<std::string> terms_;
  std::vector<uint64_t> df_;  // by term id
  std::unordered_map<std::string, Doc> docs_;
  uint64_t total_length_ = 0;
  std::vector<std::string> scratch_;
};

}  // namespace warp::writes
