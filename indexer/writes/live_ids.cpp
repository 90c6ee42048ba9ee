#include "indexer/writes/live_ids.hpp"

#include "common/index/index_files.hpp"

namespace warp::writes {

const char* write_result_name(WriteResult result) {
  switch (result) {
    case WriteResult::kCreated:
      return "created";
    case WriteResult::kReplaced:
      return "replaced";
    case WriteResult::kDeleted:
      return "deleted";
    case WriteResult::kNotFound:
      return "not_found";
  }
  return "unknown";
}

std::unordered_set<std::string> read_generation_ids(const std::string& dir) {
  std::unordered_set<std::string> ids;
  if (dir.empty()) return ids;
  for (const auto& partition : open_index(dir)) {
    const IndexView& view = partition->view();
    ids.insert(view.external_ids.begin(), view.external_ids.end());
  }
  return ids;
}

LiveIds::LiveIds(const std::string& dir, uint64_t folded, const WriteLog& log) : generation_(read_generation_ids(dir)) {
  size_ = generation_.size();
  log.replay(folded, [&](uint64_t sequence, const WriteOp& op) { apply_one(sequence, op); });
}

bool LiveIds::holds(const std::string& id) const {
  auto it = written_.find(id);
  return it != written_.end() ? it->second.live : generation_.contains(id);
}

WriteResult LiveIds::apply_one(uint64_t sequence, const WriteOp& op) {
  const bool held = holds(op.id), put = op.kind == WriteOp::Kind::kPut;
  size_ += static_cast<size_t>(put && !held) - static_cast<size_t>(!put && held);
  written_[op.id] = {sequence, put};
  return put ? (held ? WriteResult::kReplaced : WriteResult::kCreated)
             : (held ? WriteResult::kDeleted : WriteResult::kNotFound);
}

std::vector<WriteResult> LiveIds::apply(uint64_t first, const std::vector<WriteOp>& ops) {
  std::vector<WriteResult> results;
  results.reserve(ops.size());
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < ops.size(); ++i) results.push_back(apply_one(first + i, ops[i]));
  return results;
}

void LiveIds::published(const std::string& dir, uint64_t folded, bool inputs_changed) {
  // Read outside the lock: the committer goes on meanwhile.
  std::unordered_set<std::string> ids = inputs_changed ? read_generation_ids(dir) : std::unordered_set<std::string>{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (inputs_changed) generation_.swap(ids);
  // A write whose id was written again after `folded` stays: holds() reads it before the
  // generation's ids, and it is moved in by the fold that holds its last write.
  std::erase_if(written_, [&](const auto& entry) {
    if (entry.second.sequence > folded) return false;
    if (!inputs_changed) {
      if (entry.second.live)
        generation_.insert(entry.first);
      else
        generation_.erase(entry.first);
    }
    return true;
  });
  size_ = generation_.size();
  for (const auto& [id, written] : written_)
    size_ += static_cast<size_t>(written.live) - static_cast<size_t>(generation_.contains(id));
}

size_t LiveIds::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

}  // namespace warp::writes
