// A leaf's writes after the generation it serves (the near-real-time path, docs/writes.md): the
// LoggedWrites its tail brought (leaf/live/write_tail.hpp), kept in sequence order from the
// generation's last write on, and what to serve with them: the generation's partitions searched
// by LiveQueryProcessors (the overlay of today's statistics and the replaced or deleted documents,
// beside a segment of the documents written since that the partition holds). Writes are kept
// until a generation holding them is served. Not thread-safe: the LeafServer serializes it.
#pragma once
#include <deque>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/transfer/tail_frames.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

class LiveWrites {
 public:
  // A generation to serve: the writes it holds are dropped. Returns what to serve.
  std::shared_ptr<const LoadedIndex> rebase(std::shared_ptr<const LoadedIndex> base);
  // An answer of the indexer's tail. Returns what to serve now, or null when nothing changed.
  std::shared_ptr<const LoadedIndex> take(const transfer::TailAnswer& answer);
  bool has_base() const { return base_ != nullptr; }
  // The last write held: the next tail request asks for the writes after it.
  uint64_t after() const;
  // The indexer's statistics are of a newer generation than the one served (its inputs changed):
  // no write applies until that generation is served.
  bool waiting_for_generation() const { return base_ && base_->generation < epoch_; }
  size_t writes_held() const { return writes_.size(); }

 private:
  std::shared_ptr<const LoadedIndex> snapshot() const;
  std::shared_ptr<const LoadedIndex> base_;
  std::vector<std::unordered_map<std::string_view, DocId>> ids_;  // by slot: the generation's documents
  std::deque<LoggedWrite> writes_;                                // consecutive, after the generation's
  uint64_t epoch_ = 0;
};

}  // namespace warp
