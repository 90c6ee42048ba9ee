// A leaf's writes after the generation it serves (the near-real-time path, docs/writes.md): the
// LoggedWrites its tail brought (leaf/live/write_tail.hpp), kept in sequence order from the
// generation's last write on, and what to serve with them: the generation's partitions searched
// by LiveQueryProcessors (the overlay of today's statistics and the replaced or deleted documents,
// beside segments of the documents written since that the partition holds). Writes are kept
// until a generation holding them is served. Each answer's puts become a new segment of each
// partition, and the newest segments are merged while the one before is at most twice as large
// (as a binary counter: about log2 of the documents held, each document rebuilt about that often),
// so an answer costs its own documents' indexing and a pass over the documents' lengths, not a
// rebuild of everything held. Not thread-safe: the LeafServer serializes it.
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
  // A partition's documents written in a run of sequences: a segment, and each document's write.
  struct Chunk {
    std::shared_ptr<LiveSegment> segment;
    std::vector<const LoggedWrite*> writes;  // by doc of the segment (into writes_)
  };
  std::shared_ptr<const LoadedIndex> snapshot() const;
  // Adds a segment to each partition of the puts among writes_[from...] that are the last write of
  // their id there, then merges as the policy says.
  void add_chunks(size_t from);
  Chunk build_chunk(size_t slot, const std::vector<const LoggedWrite*>& writes) const;
  std::shared_ptr<const LoadedIndex> base_;
  std::vector<std::vector<Chunk>> chunks_;                        // by slot, oldest first
  std::vector<std::unordered_map<std::string_view, DocId>> ids_;  // by slot: the generation's documents
  std::deque<LoggedWrite> writes_;                                // consecutive, after the generation's
  uint64_t epoch_ = 0;
};

}  // namespace warp
