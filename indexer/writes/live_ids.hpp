// Which document ids the index holds at the head of the write log, so that each acknowledged write
// can say what it did: a put `created` or `replaced` a document, a delete `deleted` one or found
// `not_found`. The ids of the latest generation, and over them the writes after what it folded in
// (id → its last write's sequence and whether it left the document). Each publication moves the
// writes it folded in into the generation's ids (or, the inputs changed, reads its ids), so it is
// exact whatever the generation was built from. Classification happens on the log's committer in
// sequence order; publication on the service's thread: a mutex between them.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "indexer/writes/write_log.hpp"

namespace warp::writes {

enum class WriteResult : uint8_t { kCreated = 1, kReplaced = 2, kDeleted = 3, kNotFound = 4 };
const char* write_result_name(WriteResult result);  // "created", "replaced", "deleted", "not_found"

class LiveIds {
 public:
  // The ids of generation `dir` (empty: none) holding the log's writes up to `folded`, then the
  // log's writes after it. Throws Error when the generation cannot be read.
  LiveIds(const std::string& dir, uint64_t folded, const WriteLog& log);
  // The writes `ops`, durable from sequence `first`: what each did, and the state moves on.
  std::vector<WriteResult> apply(uint64_t first, const std::vector<WriteOp>& ops);
  // A new generation in `dir` holds the writes up to `folded`. Built from the same inputs as the
  // one before, its ids are those ids with the folded writes applied (nothing read); from other
  // inputs (`inputs_changed`), they are read from `dir`.
  void published(const std::string& dir, uint64_t folded, bool inputs_changed);
  size_t size() const;  // documents held now

 private:
  struct Written {
    uint64_t sequence = 0;
    bool live = false;
  };
  bool holds(const std::string& id) const;                      // under mutex_
  WriteResult apply_one(uint64_t sequence, const WriteOp& op);  // under mutex_
  mutable std::mutex mutex_;
  std::unordered_set<std::string> generation_;
  std::unordered_map<std::string, Written> written_;  // after what generation_ folded in
  size_t size_ = 0;
};

// The external ids of every partition of the index in `dir`.
std::unordered_set<std::string> read_generation_ids(const std::string& dir);

}  // namespace warp::writes
