#include "common/index/partition_reader.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <filesystem>
#include <functional>
#include <set>
#include <fstream>
#include <sstream>

#include "common/index/partition_format.hpp"
#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp {

using namespace partition_format;

struct Partition::StoredFamily {
  OpenDb db;
  rocksdb::ReadOptions read;
  bool stored = false;  // holds stored forms
};

namespace {

// A partition's word positions read from its family, a row per phrase word and chunk (RocksDB's
// block cache keeps the rows read often). Holds the database it reads.
class FamilyPositions : public WordPositions {
 public:
  FamilyPositions(std::shared_ptr<const Partition::StoredFamily> family, std::vector<DocId> chunks, std::string path)
      : family_(std::move(family)), chunks_(std::move(chunks)), path_(std::move(path)) {}
  const std::vector<DocId>& chunks() const override { return chunks_; }
  // Pinned in the block cache, not copied: a common word's row is long.
  bool row(DocId chunk, std::string_view term, PositionRow& out) const override {
    auto pinned = std::make_shared<rocksdb::PinnableSlice>();
    const rocksdb::Status status =
        family_->db.db->Get(family_->read, family_->db.handles[kPositions], position_key(chunk, term), pinned.get());
    if (status.IsNotFound()) return false;
    check(status, path_, "reading word positions");
    out.bytes = pinned->ToStringView();
    out.keep = std::move(pinned);
    return true;
  }
  void for_each_row(const std::function<void(std::string_view key, std::string_view row)>& visit) const override {
    std::unique_ptr<rocksdb::Iterator> it(family_->db.db->NewIterator(family_->read, family_->db.handles[kPositions]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) visit(it->key().ToStringView(), it->value().ToStringView());
    check(it->status(), path_, "reading word positions");
  }

 private:
  std::shared_ptr<const Partition::StoredFamily> family_;
  std::vector<DocId> chunks_;
  std::string path_;
};

}  // namespace

Partition::~Partition() = default;

// Where a partition's lexicon splits into term ranges read side by side: the first keys of its
// SST files but the first (a partition from the parallel build has one per term range of the
// build, in order), merged into at most `most` ranges of about as many files each. None for a
// lexicon in one file.
std::vector<std::string> lexicon_range_bounds(rocksdb::DB* db, size_t most) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  std::vector<std::string> firsts;
  for (const rocksdb::LiveFileMetaData& file : files) {
    if (file.column_family_name == kFamilies[kLexicon]) firsts.push_back(file.smallestkey);
  }
  std::sort(firsts.begin(), firsts.end());
  firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
  std::vector<std::string> bounds;
  const size_t ranges = std::min(std::max<size_t>(most, 1), firsts.size());
  for (size_t r = 1; r < ranges; ++r) bounds.push_back(firsts[r * firsts.size() / ranges]);
  return bounds;
}

namespace {

// The term ranges of a partition's lexicon, read side by side (lexicon and postings are both in term
// order): each range's part of the lexicon, then of the lists.
struct TermRange {
  std::vector<std::string> terms;
  std::vector<TermInfo> infos;
  std::vector<uint32_t> list_crcs;
  std::vector<Posting> tops;       // its terms' best postings (TermInfo::tops indexes them here first)
  std::vector<Score> rank_floors;  // its terms' rank floors (TermInfo::ranks, the same)
  uint32_t crc = 0;                // of its lexicon rows, as the content CRC chains them, from 0
  uint64_t crc_bytes = 0;          // the bytes that CRC covers
  uint64_t words = 0;              // its lists' words
  std::string error;               // the first thing wrong in it (reported for the first such range)
};

// A partition being read into memory: the database, open until the partition is read, and the
// view it fills, step by step (open_partition below).
struct PartitionLoad {
  PartitionLoad(const std::string& dir, const OpenOptions& options, IndexView& view, std::string& stored,
                std::vector<size_t>& stored_ends)
      : dir(dir), options(options), view(view), stored(stored), stored_ends(stored_ends) {}
  const std::string& dir;
  const OpenOptions& options;
  IndexView& view;
  std::string& stored;               // the documents' title, url and length records, back to back
  std::vector<size_t>& stored_ends;  // where each document's record ends in `stored`
  OpenDb opened;
  rocksdb::DB* db = nullptr;
  rocksdb::ReadOptions read;
  uint64_t file_bytes = 0;             // the files' bytes, as WARP-CHECKSUMS lists them
  uint64_t term_count = 0;             // the meta row's
  uint32_t expected_crc = 0;           // the content CRC the meta row records
  std::string doc_lengths;             // the meta row, as stored
  std::vector<DocId> position_chunks;  // the meta row "positions" (word_positions.hpp); empty: none kept
  std::vector<std::string> bounds;     // the term ranges' first keys but the first
  std::vector<TermRange> term_ranges;
  uint32_t crc = 0;                                                    // the content CRC as read so far
  std::vector<const std::pair<const std::string, TermInfo>*> entries;  // the lexicon's entries as read

  const std::string* lower(size_t r) const { return r == 0 ? nullptr : &bounds[r - 1]; }
  const std::string* upper(size_t r) const { return r + 1 < term_ranges.size() ? &bounds[r] : nullptr; }
  bool in_range(const rocksdb::Iterator& it, size_t r) const {
    return it.Valid() && (upper(r) == nullptr || it.key().compare(rocksdb::Slice(*upper(r))) < 0);
  }
  void seek(rocksdb::Iterator& it, size_t r) const {
    if (lower(r) == nullptr) {
      it.SeekToFirst();
    } else {
      it.Seek(*lower(r));
    }
  }
  // `work` on every term range side by side; the first range's error is thrown.
  void each_range(const std::function<void(size_t, TermRange&)>& work) {
    const size_t range_count = term_ranges.size();
    run_parallel_tasks(range_count, range_count, [&](size_t r) {
      try {
        work(r, term_ranges[r]);
      } catch (const std::exception& e) {
        term_ranges[r].error = e.what();
      }
    });
    for (const TermRange& range : term_ranges) {
      if (!range.error.empty()) throw Error(range.error);
    }
  }
};

// REQUIRES: the files verified. Opens the database read-only.
void open_database(PartitionLoad& load) {
  rocksdb::DBOptions db_options;
  db_options.max_open_files = 64;
  // A partition holds one SST file per column family (ingested): opening them needs no pool of 16
  // threads started and joined per open, the default.
  db_options.max_file_opening_threads = 1;
  open_read_only(load.dir, db_options, table_factory_with_cache(), load.opened);
  load.db = load.opened.db.get();
  load.read.verify_checksums = true;
}

// The meta rows: format version and analyzer (refused unless this build reads them), generation,
// docID range, codec, BM25 parameters, collection statistics, document lengths, content CRC.
void read_meta(PartitionLoad& load) {
  const std::string& dir = load.dir;
  const OpenOptions& options = load.options;
  rocksdb::DB* db = load.db;
  const rocksdb::ReadOptions& read = load.read;
  const auto& handles = load.opened.handles;
  IndexView& view = load.view;
  const auto meta_field = [&](const std::string& key) {
    std::string value;
    rocksdb::Status status = db->Get(read, handles[kMeta], key, &value);
    if (status.IsNotFound())
      throw Error("partition " + dir + ": metadata field '" + key + "' is missing (not a complete partition)");
    check(status, dir, "reading metadata '" + key + "'");
    return value;
  };
  const auto has_meta_field = [&](const std::string& key) {
    std::string value;
    return !db->Get(read, handles[kMeta], key, &value).IsNotFound();
  };
  const auto number = [&](const std::string& key) -> uint64_t {
    const std::string text = meta_field(key);
    try {
      return std::stoull(text);
    } catch (...) {
      throw Error("partition " + dir + ": metadata field '" + key + "' is not a number: '" + text + "'");
    }
  };
  PartitionMeta& meta = view.meta;
  meta.format_version = static_cast<uint32_t>(number("format_version"));
  if (meta.format_version < kOldestFormatVersion || meta.format_version > kFormatVersion) {
    throw Error("partition " + dir + ": format version " + std::to_string(meta.format_version) +
                ", this build reads versions " + std::to_string(kOldestFormatVersion) + " to " +
                std::to_string(kFormatVersion) +
                (meta.format_version > kFormatVersion ? "; upgrade this service, or rebuild the index with this build"
                                                      : "; rebuild the index"));
  }
  meta.analyzer_version = meta_field("analyzer_version");
  if (!options.expected_analyzer.empty() && meta.analyzer_version != options.expected_analyzer) {
    throw Error("partition " + dir + ": analyzed with '" + meta.analyzer_version + "', but queries use '" +
                options.expected_analyzer + "'; rebuild the index or change the analyzer flags");
  }
  AnalyzerConfig::from_version(meta.analyzer_version);  // known to this build?
  meta.generation = number("generation");
  meta.partition_id = static_cast<uint32_t>(number("partition_id"));
  meta.partition_count = static_cast<uint32_t>(number("partition_count"));
  meta.doc_begin = static_cast<DocId>(number("doc_begin"));
  meta.doc_end = static_cast<DocId>(number("doc_end"));
  meta.codec = meta_field("codec");
  const auto real = [&](const std::string& key) -> float {
    const std::string text = meta_field(key);
    char* end = nullptr;
    const float v = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0')
      throw Error("partition " + dir + ": metadata field '" + key + "' is not a number");
    return v;
  };
  meta.bm25.k1 = real("bm25_k1");
  meta.bm25.b = real("bm25_b");
  if (has_meta_field("bm25_k3")) meta.bm25.k3 = real("bm25_k3");  // query-time: older partitions lack it
  meta.stats.doc_count = number("doc_count");
  meta.stats.total_length = number("total_length");
  meta.posting_count = number("posting_count");
  load.term_count = number("term_count");
  load.doc_lengths = meta_field("doc_lengths");
  const std::string& doc_lengths = load.doc_lengths;
  if (meta.doc_end < meta.doc_begin || doc_lengths.size() != size_t{meta.doc_end - meta.doc_begin} * 4) {
    throw Error("partition " + dir + ": document lengths do not match the docID range");
  }
  view.doc_lengths.resize(meta.doc_end - meta.doc_begin);
  std::memcpy(view.doc_lengths.data(), doc_lengths.data(), doc_lengths.size());
  if (has_meta_field("columns")) {  // the keyword and numeric fields (doc_columns.hpp); older partitions lack them
    try {
      view.columns = std::make_shared<const DocColumns>(DocColumns::parse(meta_field("columns"), view.doc_count()));
    } catch (const Error& e) {
      throw Error("partition " + dir + ": " + e.what());
    }
  }

  if (has_meta_field("positions")) {  // word positions (word_positions.hpp): partitions built without them lack it
    try {
      load.position_chunks = parse_position_chunks(meta_field("positions"));
    } catch (const Error& e) {
      throw Error("partition " + dir + ": " + e.what());
    }
    if (load.position_chunks.front() != meta.doc_begin ||
        load.position_chunks.back() >= std::max(meta.doc_end, meta.doc_begin + 1))
      throw Error("partition " + dir + ": the word position chunks lie outside its documents");
    if (handles[kPositions] == nullptr) throw Error("partition " + dir + ": word positions listed but not there");
  }

  // The content CRC (the lexicon's rows, the document lengths, the documents' rows, as
  // PartitionAssembly::finish wrote it) takes the lexicon's rows as the loop below reads them: a
  // pass of its own over the lexicon had been a sixth of an open. It is checked before the
  // documents are parsed; the lexicon's rows have their own checks (each list's CRC, its structure).
  load.expected_crc = static_cast<uint32_t>(number("content_crc"));
}

// Pass 1: each term range's lexicon rows (terms, their entries, the content CRC's part, the
// words), then every list's place in the arena.
void read_lexicon(PartitionLoad& load) {
  const std::string& dir = load.dir;
  rocksdb::DB* db = load.db;
  const rocksdb::ReadOptions& read = load.read;
  const auto& handles = load.opened.handles;
  IndexView& view = load.view;
  // A one-partition leaf (the Kubernetes layout) had opened on one thread: ~1.7 s for 300 MB on the
  // H100 host, minutes for a GOV2-sized partition.
  const size_t threads =
      load.options.threads > 0 ? load.options.threads : std::max(1u, std::thread::hardware_concurrency());
  load.bounds = lexicon_range_bounds(db, threads);
  load.term_ranges.resize(load.bounds.size() + 1);
  // Pass 1: each range's lexicon rows (terms, their entries, the content CRC's part, the words).
  load.each_range([&](size_t r, TermRange& range) {
    std::unique_ptr<rocksdb::Iterator> lexicon(db->NewIterator(read, handles[kLexicon]));
    for (load.seek(*lexicon, r); load.in_range(*lexicon, r); lexicon->Next()) {
      const std::string_view key = lexicon->key().ToStringView(), value = lexicon->value().ToStringView();
      range.crc = crc32_of(value, crc32_of(key, range.crc));
      range.crc_bytes += key.size() + value.size();
      // The context of a ByteReader's error is a string of its own: built for a short entry only,
      // not for each of millions of terms.
      constexpr size_t kEntryBytes = 4 + 8 + 4 + 4;
      const std::string_view fields = value.size() >= kEntryBytes ? value : std::string_view();
      ByteReader entry(
          fields.empty() ? value : fields,
          fields.empty() ? "partition " + dir + ": lexicon entry '" + std::string(key) + "'" : std::string());
      TermInfo info;
      info.df = entry.u32();
      info.cf = entry.u64();
      info.words = entry.u32();
      range.list_crcs.push_back(entry.u32());
      if (!entry.done()) {  // the term's best postings: checked, a damaged one must not reach a search
        const auto damaged = [&](const char* what) {
          return Error("partition " + dir + ": damaged lexicon entry of term '" + std::string(key) + "' (" + what +
                       ")");
        };
        if (entry.u8() != kTermTops || entry.remaining() < kTermTops * 8) throw damaged("its best postings");
        info.tops = static_cast<uint32_t>(range.tops.size());
        for (uint32_t t = 0; t < kTermTops; ++t) {
          const DocId doc = entry.u32();
          const TermFreq freq = entry.u32();
          if (doc < view.meta.doc_begin || doc >= view.meta.doc_end || freq == 0)
            throw damaged("a best posting outside the partition");
          range.tops.push_back({doc, freq});
        }
        if (!entry.done()) {  // its rank floors (format version 2): non-negative, none above the one before
          const uint32_t count = entry.u8();
          if (view.meta.format_version < 2 || count == 0 || count > kRankFloors.size() ||
              entry.remaining() != count * 4) {
            throw damaged("its rank floors");
          }
          info.ranks = static_cast<uint32_t>(range.rank_floors.size());
          info.rank_count = count;
          for (uint32_t r = 0; r < count; ++r) {
            const Score floor = std::bit_cast<Score>(entry.u32());
            if (!(floor >= 0) || std::isinf(floor) || (r > 0 && floor > range.rank_floors.back()))
              throw damaged("its rank floors");
            range.rank_floors.push_back(floor);
          }
        }
      }
      range.words += info.words;
      range.terms.emplace_back(key);
      range.infos.push_back(info);
    }
    check(lexicon->status(), dir, "reading lexicon");
  });
  uint64_t words = 0, terms_read = 0;
  for (TermRange& range : load.term_ranges) {
    const uint32_t tops_before = static_cast<uint32_t>(view.term_tops.size());
    const uint32_t floors_before = static_cast<uint32_t>(view.term_rank_floors.size());
    for (TermInfo& info : range.infos) {
      info.offset = words, words += info.words;
      if (info.tops != kNoTermTops) info.tops += tops_before;
      info.ranks += floors_before;
    }
    view.term_tops.insert(view.term_tops.end(), range.tops.begin(), range.tops.end());
    view.term_rank_floors.insert(view.term_rank_floors.end(), range.rank_floors.begin(), range.rank_floors.end());
    range.tops = {};
    range.rank_floors = {};
    terms_read += range.terms.size();
  }
  // The lists are stored uncompressed (they are compressed already), so their words cannot exceed a
  // quarter of the files' bytes: a damaged lexicon entry cannot ask for more memory than that.
  if (words > load.file_bytes / 4)
    throw Error("partition " + dir + ": the lexicon's lists are longer than the partition's files (damaged)");
  view.postings.resize(words + kReadPaddingWords, 0);
  if (terms_read != load.term_count) throw Error("partition " + dir + ": lexicon holds fewer terms than recorded");
}

// Pass 2: each term range's lists, checked against their CRCs and copied to their places.
void read_lists(PartitionLoad& load) {
  const std::string& dir = load.dir;
  rocksdb::DB* db = load.db;
  const rocksdb::ReadOptions& read = load.read;
  const auto& handles = load.opened.handles;
  IndexView& view = load.view;
  // Pass 2: each range's lists, checked and copied to their places.
  load.each_range([&](size_t r, TermRange& range) {
    std::unique_ptr<rocksdb::Iterator> postings(db->NewIterator(read, handles[kPostings]));
    load.seek(*postings, r);
    for (size_t i = 0; i < range.terms.size(); ++i, postings->Next()) {
      const std::string& term = range.terms[i];
      if (!postings->Valid() || postings->key() != rocksdb::Slice(term)) {
        check(postings->status(), dir, "reading postings");
        throw Error("partition " + dir + ": posting list of term '" + term + "' is missing");
      }
      const rocksdb::Slice blob = postings->value();
      const TermInfo& info = range.infos[i];
      if (blob.size() != size_t{info.words} * 4 || crc32_of(blob.data(), blob.size()) != range.list_crcs[i]) {
        throw Error("partition " + dir + ": checksum mismatch in the posting list of term '" + term + "'");
      }
      std::memcpy(view.postings.data() + info.offset, blob.data(), blob.size());
    }
  });
}

// The lexicon map from the ranges' terms, and the content CRC's lexicon part.
void build_lexicon(PartitionLoad& load) {
  const std::string& dir = load.dir;
  IndexView& view = load.view;
  const uint64_t term_count = load.term_count;
  auto& entries = load.entries;
  uint32_t& crc = load.crc;
  for (const TermRange& range : load.term_ranges)
    crc = static_cast<uint32_t>(crc32_combine(crc, range.crc, static_cast<z_off_t>(range.crc_bytes)));
  crc = crc32_of(load.doc_lengths, crc);
  // Grown term by term, the lexicon's rehashes were a tenth of an open; the count is the meta row's,
  // so a damaged one is not trusted beyond 2^24 terms (the map grows past that as before).
  view.lexicon.reserve(std::min<uint64_t>(term_count, uint64_t{1} << 24));
  entries.reserve(std::min<uint64_t>(term_count, uint64_t{1} << 24));
  for (TermRange& range : load.term_ranges) {
    for (size_t i = 0; i < range.terms.size(); ++i) {
      const auto [kept, added] = view.lexicon.emplace(std::move(range.terms[i]), range.infos[i]);
      if (added) entries.push_back(&*kept);
    }
    range = TermRange{};  // its memory for the next range's nodes
  }
  if (view.lexicon.size() != term_count) throw Error("partition " + dir + ": lexicon holds fewer terms than recorded");
}

// Structure check of every list, in the order read (the map's nodes were allocated in that order:
// walked by bucket, each was a cache miss), slices of it side by side.
void check_lists(PartitionLoad& load) {
  const std::string& dir = load.dir;
  IndexView& view = load.view;
  const auto& entries = load.entries;
  const size_t range_count = load.term_ranges.size();
  {
    const size_t slices = std::min<size_t>(entries.size() / 4096 + 1, 4 * range_count);
    std::vector<std::string> errors(slices);
    run_parallel_tasks(slices, range_count, [&](size_t slice) {
      try {
        for (size_t i = slice * entries.size() / slices; i < (slice + 1) * entries.size() / slices; ++i) {
          const PostingListView list = view.list(entries[i]->first, entries[i]->second);
          // A rank floor past the list's length would claim postings it does not have.
          const uint32_t ranks = entries[i]->second.rank_count;
          if (ranks > 0 && kRankFloors[ranks - 1] > list.count) {
            throw Error("partition " + dir + ": damaged lexicon entry of term '" + entries[i]->first +
                        "' (its rank floors: more ranks than its list has postings)");
          }
        }
      } catch (const std::exception& e) {
        errors[slice] = e.what();
      }
    });
    for (const std::string& error : errors) {
      if (!error.empty()) throw Error(error);
    }
  }
}

// The documents' rows: the content CRC completed and checked before any is parsed, then each
// document's external id, title, url and length into memory.
void read_documents(PartitionLoad& load) {
  const std::string& dir = load.dir;
  rocksdb::DB* db = load.db;
  const rocksdb::ReadOptions& read = load.read;
  const auto& handles = load.opened.handles;
  IndexView& view = load.view;
  uint32_t& crc = load.crc;
  std::unique_ptr<rocksdb::Iterator> documents(db->NewIterator(read, handles[kDocuments]));
  view.external_ids.reserve(view.doc_lengths.size());
  load.stored_ends.reserve(view.doc_lengths.size());
  // The documents' rows complete the content CRC before any is parsed (a few bytes each, few beside
  // the lexicon's terms: a pass of their own costs little).
  for (documents->SeekToFirst(); documents->Valid(); documents->Next()) {
    crc = crc32_of(documents->key().ToStringView(), crc);
    crc = crc32_of(documents->value().ToStringView(), crc);
  }
  check(documents->status(), dir, "reading documents");
  if (crc != load.expected_crc)
    throw Error("partition " + dir + ": content checksum mismatch (the partition is corrupt)");
  for (documents->SeekToFirst(); documents->Valid(); documents->Next()) {
    const std::string_view record = documents->value().ToStringView();
    ByteReader value(record, "partition " + dir + ": document record");
    view.external_ids.push_back(value.str());
    const size_t rest = record.size() - value.remaining();
    value.str(), value.str(), value.u32();  // title, url, length: well formed?
    load.stored.append(record.substr(rest));
    load.stored_ends.push_back(load.stored.size());
  }
  check(documents->status(), dir, "reading documents");
  if (view.external_ids.size() != view.doc_lengths.size())
    throw Error("partition " + dir + ": document records missing");
}

}  // namespace

std::unique_ptr<Partition> open_partition(const std::string& dir, const OpenOptions& options) {
  if (!std::filesystem::is_directory(dir)) throw Error("partition " + dir + ": no such directory");
  std::unique_ptr<Partition> partition(new Partition());
  partition->path_ = dir;
  PartitionLoad load(dir, options, partition->view_, partition->stored_, partition->stored_ends_);
  load.file_bytes = verify_files(dir);
  open_database(load);
  read_meta(load);
  read_lexicon(load);
  read_lists(load);
  build_lexicon(load);
  check_lists(load);
  read_documents(load);
  // Closed here: everything the partition serves is held in memory but the stored forms, which a
  // database of that family alone serves (every file opened now: the directory may go before the
  // partition does).
  const bool stored = load.opened.handles[kStored] != nullptr;
  load.opened.close();
  if (stored || !load.position_chunks.empty()) {
    auto family = std::make_shared<Partition::StoredFamily>();
    rocksdb::DBOptions db_options;
    db_options.max_open_files = -1;
    db_options.max_file_opening_threads = 1;
    std::vector<int> families;
    if (stored) families.push_back(kStored);
    if (!load.position_chunks.empty()) families.push_back(kPositions);
    open_read_only(dir, db_options, table_factory_with_cache(), family->db, families);
    family->read.verify_checksums = true;
    if (stored) {
      rocksdb::ColumnFamilyMetaData meta;
      family->db.db->GetColumnFamilyMetaData(family->db.handles[kStored], &meta);
      family->stored = meta.file_count > 0;
    }
    if (!load.position_chunks.empty())
      partition->view_.positions =
          std::make_shared<const FamilyPositions>(family, std::move(load.position_chunks), dir);
    if (family->stored) partition->stored_family_ = std::move(family);
  }
  partition->view_.compute_length_norms();
  partition->view_.rescore(options.bm25.applied_to(partition->view_.meta.bm25));
  return partition;
}

std::optional<std::string> Partition::source(DocId doc) const {
  if (stored_family_ == nullptr || doc < view_.meta.doc_begin || doc >= view_.meta.doc_end) return std::nullopt;
  std::string value;
  const rocksdb::Status status =
      stored_family_->db.db->Get(stored_family_->read, stored_family_->db.handles[kStored], doc_key(doc), &value);
  if (status.IsNotFound()) return std::nullopt;
  check(status, path_, "reading a stored document");
  return value;
}

const Partition::IdMap& Partition::ids() const {
  std::call_once(ids_once_, [this] {
    ids_.reserve(view_.external_ids.size());
    for (size_t i = 0; i < view_.external_ids.size(); ++i)
      ids_.emplace(view_.external_ids[i], view_.meta.doc_begin + static_cast<DocId>(i));
  });
  return ids_;
}

std::optional<DocId> Partition::find(std::string_view external_id) const {
  const IdMap& map = ids();
  auto it = map.find(external_id);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

std::optional<DocumentRecord> Partition::document(DocId doc) const {
  if (doc < view_.meta.doc_begin || doc >= view_.meta.doc_end) return std::nullopt;
  const size_t i = doc - view_.meta.doc_begin;
  const size_t begin = i == 0 ? 0 : stored_ends_[i - 1];
  ByteReader reader(std::string_view(stored_).substr(begin, stored_ends_[i] - begin), "document record");
  DocumentRecord record;
  record.external_id = view_.external_ids[i];
  record.title = reader.str();
  record.url = reader.str();
  record.length = reader.u32();
  return record;
}

}  // namespace warp
