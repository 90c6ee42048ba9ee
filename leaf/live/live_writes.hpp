// A leaf's writes after the generation it serves (the near-real-time path, docs/writes.md): the
// LoggedWrites its tail brought (leaf/live/write_tail.hpp), kept in sequence order from the
// generation's last write on, and what to serve with them: the generation's partitions searched
// by LiveQueryProcessors (the overlay of today's statistics and the replaced or deleted documents,
// beside segments of the documents written since that the partition holds). Writes are kept
// until a generation holding them is served. Each answer's puts become a new segment of each
// partition; every four consecutive segments of a tier are merged on a thread of their own and
// swapped in at a later answer, so an answer costs its own documents' indexing and a
// pass over the documents' lengths, never a merge. Not thread-safe: the LeafServer serializes it.
#pragma once
#include <deque>
#include <future>
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
  // Waits for the merges under way and takes their segments in. Returns what to serve, or null
  // when none was under way.
  std::shared_ptr<const LoadedIndex> settle();
  size_t merges_running() const { return merges_.size(); }
  // Held (tests): merges done are taken in only by settle(), and a new generation drops them, so
  // that writes mask documents of segments a merge read, and a swap meets a merge under way, as
  // they do while a long merge runs.
  void hold_merges(bool hold) { hold_merges_ = hold; }
  size_t segments(size_t slot) const { return slot < chunks_.size() ? chunks_[slot].size() : 0; }
  size_t segments() const {  // over every partition
    size_t all = 0;
    for (const auto& chunks : chunks_) all += chunks.size();
    return all;
  }
  // The last write of `id` among those served (LeafServer::written).
  LeafServer::WrittenCopy written(std::string_view id) const;

 private:
  // A partition's documents written in a run of sequences: a segment, each document's write, and
  // those written again since (kept out of its searches).
  using Writes = std::vector<std::shared_ptr<const LoggedWrite>>;
  struct Chunk {
    std::shared_ptr<LiveSegment> segment;
    Writes writes;                 // by doc of the segment (null once a generation holds it)
    std::vector<uint8_t> deleted;  // by doc of the segment
    size_t deleted_count = 0;
    bool merging = false;  // read by a merge under way
  };
  // Segments of a partition being merged into one on a thread of its own: the chunks it replaces
  // (consecutive in chunks_[slot]) and, by doc of the merged one, the chunk and doc it comes from
  // (for what was written again while it ran).
  struct Merge {
    size_t slot = 0;
    std::vector<std::shared_ptr<Chunk>> sources;
    std::vector<std::pair<Chunk*, uint32_t>> origin;
    std::future<std::shared_ptr<Chunk>> merged;
  };
  std::shared_ptr<const LoadedIndex> snapshot() const;
  void reset();  // nothing held over the generation
  // Takes in the merges done (all: waits for those under way). True when one was taken.
  bool take_merges(bool wait);
  void start_merges(size_t slot);  // of the newest segments, as the tiers say
  // Takes writes_[from...] in: the copies they replace masked, a segment a partition of their puts
  // that are the last write of their id, merges as the policy says, a layer of their df.
  void absorb(size_t from);
  // A segment of `writes` in partition `slot` of `base` (runs on any thread).
  static std::shared_ptr<Chunk> build_chunk(const LoadedIndex& base, size_t slot, const Writes& writes);
  // Leaves the merges under way to end on their own, their results unused (a swap, a new epoch).
  void drop_merges();
  void mark(std::string_view id);  // the live copy of `id` (the generation's or a segment's) replaced
  std::shared_ptr<const LoadedIndex> base_;
  std::vector<const Partition::IdMap*> ids_;  // by slot: the generation's documents (the partition's own map)
  std::deque<std::shared_ptr<const LoggedWrite>> writes_;  // consecutive, after the generation's
  uint64_t epoch_ = 0;
  // Kept from answer to answer, each updated by the new writes only (an answer costs its own
  // writes, a pass over the documents' lengths and a copy of the masks, not a rebuild of all held).
  std::vector<std::vector<std::shared_ptr<Chunk>>> chunks_;                  // by slot, oldest first
  std::vector<std::vector<uint8_t>> base_deleted_;                           // by slot, by doc - doc_begin
  std::unordered_map<std::string_view, uint64_t> latest_;                    // id → the sequence of its last write
  std::unordered_map<std::string_view, std::pair<Chunk*, uint32_t>> where_;  // id → its live copy in a segment
  std::vector<std::shared_ptr<const DfMap>> df_layers_;                      // oldest first
  bool hold_merges_ = false;
  std::vector<Merge> merges_;                                 // under way
  std::vector<std::future<std::shared_ptr<Chunk>>> dropped_;  // merges left to end, kept until they do
};

}  // namespace warp
