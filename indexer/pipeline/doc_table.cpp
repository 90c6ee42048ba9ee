#include "indexer/pipeline/doc_table.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <unordered_map>

#include "common/index/stored_source.hpp"
#include "common/util/byte_io.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp::pipeline {

DocTable::DocTable(std::string spill_path, bool store) : spill_path_(std::move(spill_path)), store_(store) {
  spill_ = std::fopen(spill_path_.c_str(), "wb");
  if (spill_ == nullptr) throw Error("cannot create " + spill_path_);
  std::setvbuf(spill_, nullptr, _IOFBF, 1u << 20);
}

DocTable::~DocTable() {
  if (spill_ != nullptr) std::fclose(spill_);
}

DocId DocTable::add_chunk(size_t split, uint32_t seq, const std::vector<SourceDocument>& documents) {
  ByteWriter records;
  std::vector<uint64_t> hashes;
  hashes.reserve(documents.size());
  for (const SourceDocument& doc : documents) {
    records.str(doc.external_id);
    records.str(doc.title);
    records.str(doc.url);
    if (!store_) {
      records.str("");
    } else if (!doc.source.empty()) {
      records.str(doc.source);  // as read: no copy made
    } else {
      records.str(stored_source(doc));
    }
    hashes.push_back(std::hash<std::string_view>()(doc.external_id));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t first = lengths_.size();
  if (first + documents.size() >= kEndDoc - 1) throw Error("a generation holds at most 2^32-2 documents");
  if (std::fwrite(records.bytes().data(), 1, records.bytes().size(), spill_) != records.bytes().size()) {
    throw Error("cannot write " + spill_path_ + " (disk full?)");
  }
  chunks_.push_back({split, seq, static_cast<DocId>(first), static_cast<DocId>(documents.size()), spill_bytes_});
  spill_bytes_ += records.bytes().size();
  lengths_.resize(first + documents.size(), 0);
  distinct_.resize(first + documents.size(), 0);
  id_hashes_.insert(id_hashes_.end(), hashes.begin(), hashes.end());
  return static_cast<DocId>(first);
}

void DocTable::set_counts(DocId first, const std::vector<uint32_t>& lengths, const std::vector<uint32_t>& distinct) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::copy(lengths.begin(), lengths.end(), lengths_.begin() + first);
  std::copy(distinct.begin(), distinct.end(), distinct_.begin() + first);
}

void DocTable::end_split(size_t split, uint64_t lines, std::vector<Rejection> rejections, uint64_t rejected) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (split_ends_.size() <= split) split_ends_.resize(split + 1);
  rejections.resize(std::min<size_t>(rejections.size(), 100));  // the report keeps the first 100 anyway
  split_ends_[split] = {lines, std::move(rejections)};
  rejected_ += rejected;
}

uint64_t DocTable::documents() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lengths_.size();
}

uint64_t DocTable::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lengths_.capacity() * 8 + id_hashes_.capacity() * 8 + chunks_.capacity() * sizeof(Chunk);
}

void DocTable::read_records(const Chunk& chunk, const std::function<void(DocId, DocumentRecord&)>& visit) const {
  std::FILE* in = std::fopen(spill_path_.c_str(), "rb");
  if (in == nullptr || std::fseek(in, static_cast<long>(chunk.offset), SEEK_SET) != 0) {
    if (in != nullptr) std::fclose(in);
    throw Error("cannot read " + spill_path_);
  }
  const auto field = [&](std::string& out) {
    uint32_t size = 0;
    if (std::fread(&size, 4, 1, in) != 1) throw Error(spill_path_ + " is truncated");
    out.resize(size);
    if (size != 0 && std::fread(out.data(), 1, size, in) != size) throw Error(spill_path_ + " is truncated");
  };
  DocumentRecord record;
  try {
    for (DocId i = 0; i < chunk.count; ++i) {
      field(record.external_id);
      field(record.title);
      field(record.url);
      field(record.source);
      visit(chunk.first + i, record);
    }
  } catch (...) {
    std::fclose(in);
    throw;
  }
  std::fclose(in);
}

namespace {

// `pairs` sorted, on up to `threads` threads: scattered into 256 buckets by the hash's top byte
// (which orders the buckets), each bucket then sorted on its own. The same array as std::sort's.
// From 1,024 pairs on, so that the pipeline's duplicate test (1,500 documents) takes this path.
void sort_by_hash(std::vector<std::pair<uint64_t, DocId>>& pairs, size_t threads) {
  if (threads <= 1 || pairs.size() < 1024) return std::sort(pairs.begin(), pairs.end());
  constexpr size_t kBuckets = 256;
  std::vector<size_t> start(kBuckets + 1, 0);
  for (const auto& pair : pairs) ++start[(pair.first >> 56) + 1];
  for (size_t b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  std::vector<std::pair<uint64_t, DocId>> scattered(pairs.size());
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (const auto& pair : pairs) scattered[next[pair.first >> 56]++] = pair;
  run_parallel_tasks(kBuckets, threads, [&](size_t b) {
    std::sort(scattered.begin() + static_cast<std::ptrdiff_t>(start[b]),
              scattered.begin() + static_cast<std::ptrdiff_t>(start[b + 1]));
  });
  pairs.swap(scattered);
}

}  // namespace

void DocTable::finish(const std::vector<InputSplit>& splits, ReadReport& report, size_t threads) {
  if (std::fflush(spill_) != 0) throw Error("cannot write " + spill_path_ + " (disk full?)");
  std::sort(chunks_.begin(), chunks_.end(),
            [](const Chunk& a, const Chunk& b) { return a.split != b.split ? a.split < b.split : a.seq < b.seq; });
  const size_t total = lengths_.size();
  std::vector<DocId> position(total);  // by provisional id: place in input order
  {
    DocId next = 0;
    for (Chunk& chunk : chunks_) {
      chunk.final_first = next;
      for (DocId i = 0; i < chunk.count; ++i) position[chunk.first + i] = next++;
    }
  }
  // Duplicates: equal hashes first, then the ids themselves; the last in input order wins.
  std::vector<bool> dropped(total, false);
  uint64_t replaced = 0;
  {
    std::vector<std::pair<uint64_t, DocId>> by_hash(total);  // (hash, input position)
    std::vector<DocId> provisional_at(total);
    for (DocId p = 0; p < total; ++p) by_hash[p] = {id_hashes_[p], position[p]}, provisional_at[position[p]] = p;
    std::vector<uint64_t>().swap(id_hashes_);
    sort_by_hash(by_hash, threads);
    std::unordered_map<DocId, std::string> candidates;  // provisional id → external id
    for (size_t i = 0; i + 1 < by_hash.size(); ++i) {
      if (by_hash[i].first == by_hash[i + 1].first) {
        candidates[provisional_at[by_hash[i].second]];
        candidates[provisional_at[by_hash[i + 1].second]];
      }
    }
    if (!candidates.empty()) {
      for (const Chunk& chunk : chunks_) {
        bool any = false;
        for (DocId i = 0; i < chunk.count && !any; ++i) any = candidates.count(chunk.first + i) > 0;
        if (!any) continue;
        read_records(chunk, [&](DocId p, DocumentRecord& record) {
          auto it = candidates.find(p);
          if (it != candidates.end()) it->second = record.external_id;
        });
      }
      // Within a run of equal hashes (input order ascending), every document with a later twin goes.
      for (size_t i = 0; i < by_hash.size();) {
        size_t j = i + 1;
        while (j < by_hash.size() && by_hash[j].first == by_hash[i].first) ++j;
        if (j - i > 1) {
          std::unordered_map<std::string_view, DocId> last;  // id → provisional id of its last copy
          for (size_t k = i; k < j; ++k) {
            const DocId p = provisional_at[by_hash[k].second];
            auto [it, inserted] = last.try_emplace(candidates[p], p);
            if (!inserted) {
              dropped[it->second] = true;
              ++replaced;
              it->second = p;
            }
          }
        }
        i = j;
      }
    }
  }
  final_of_.assign(total, kDropped);
  final_lengths_.clear();
  final_distinct_.clear();
  DocId next = 0;
  split_starts_.assign(splits.size(), 0);
  size_t split = 0;  // splits before it have their start
  for (const Chunk& chunk : chunks_) {
    while (split <= chunk.split && split < splits.size()) split_starts_[split++] = next;
    for (DocId i = 0; i < chunk.count; ++i) {
      const DocId p = chunk.first + i;
      if (dropped[p]) continue;
      final_of_[p] = next++;
      final_lengths_.push_back(lengths_[p]);
      final_distinct_.push_back(distinct_[p]);
    }
  }
  kept_ = next;
  while (split < splits.size()) split_starts_[split++] = next;
  std::vector<uint32_t>().swap(lengths_);
  std::vector<uint32_t>().swap(distinct_);

  report.documents = kept_;
  report.replaced = replaced;
  report.rejected = rejected_;
  report.errors.clear();
  std::vector<uint64_t> lines_before(splits.empty() ? 0 : splits.back().file + 1, 0);  // by file
  for (size_t s = 0; s < splits.size(); ++s) {
    const InputSplit& split = splits[s];
    const SplitEnd& end = s < split_ends_.size() ? split_ends_[s] : SplitEnd{};
    for (const Rejection& r : end.rejections) {
      if (report.errors.size() >= 100) break;
      report.errors.push_back(r.line > 0
                                  ? split.path + ":" + std::to_string(lines_before[split.file] + r.line) + ": " + r.why
                                  : split.path + "@" + std::to_string(r.offset) + ": " + r.why);
    }
    lines_before[split.file] += end.lines;
  }
}

void DocTable::for_each_document(DocId begin, DocId end,
                                 const std::function<void(DocId, const DocumentRecord&)>& visit) const {
  for (const Chunk& chunk : chunks_) {
    bool any = false;
    for (DocId i = 0; i < chunk.count && !any; ++i) {
      const DocId f = final_of_[chunk.first + i];
      any = f != kDropped && f >= begin && f < end;
    }
    if (!any) continue;
    read_records(chunk, [&](DocId p, DocumentRecord& record) {
      const DocId f = final_of_[p];
      if (f == kDropped || f < begin || f >= end) return;
      record.length = final_lengths_[f];
      visit(f, record);
    });
  }
}

void DocTable::remove_spill() {
  if (spill_ != nullptr) std::fclose(spill_), spill_ = nullptr;
  std::error_code ignored;
  std::filesystem::remove(spill_path_, ignored);
}

}  // namespace warp::pipeline
