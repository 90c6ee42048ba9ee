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
  // The last write of `id` among those served (LeafServer::written).
  LeafServer::WrittenCopy written(std::string_view id) const;

 private:
  // A partition's documents written in a run of sequences: a segment, each document's write, and
  // those written again since (kept out of its searches).
  struct Chunk {
    std::shared_ptr<LiveSegment> segment;
    std::vector<const LoggedWrite*> writes;  // by doc of the segment (into writes_)
    std::vector<uint8_t> deleted;            // by doc of the segment
    size_t deleted_count = 0;
  };
  std::shared_ptr<const LoadedIndex> snapshot() const;
  void reset();  // nothing held over the generation
  // Takes writes_[from...] in: the copies they replace masked, a segment a partition of their puts
  // that are the last write of their id, merges as the policy says, a layer of their df.
  void absorb(size_t from);
  std::shared_ptr<Chunk> build_chunk(size_t slot, const std::vector<const LoggedWrite*>& writes);
  void mark(std::string_view id);  // the live copy of `id` (the generation's or a segment's) replaced
  std::shared_ptr<const LoadedIndex> base_;
  std::vector<const Partition::IdMap*> ids_;  // by slot: the generation's documents (the partition's own map)
  std::deque<LoggedWrite> writes_;            // consecutive, after the generation's
  uint64_t epoch_ = 0;
  // Kept from answer to answer, each updated by the new writes only (an answer costs its own
  // writes, a pass over the documents' lengths and a copy of the masks, not a rebuild of all held).
  std::vector<std::vector<std::shared_ptr<Chunk>>> chunks_;                  // by slot, oldest first
  std::vector<std::vector<uint8_t>> base_deleted_;                           // by slot, by doc - doc_begin
  std::unordered_map<std::string_view, uint64_t> latest_;                    // id → the sequence of its last write
  std::unordered_map<std::string_view, std::pair<Chunk*, uint32_t>> where_;  // id → its live copy in a segment
  std::vector<std::shared_ptr<const DfMap>> df_layers_;                      // oldest first
};

}  // namespace warp
