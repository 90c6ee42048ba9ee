#include "common/index/partition_writer.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
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

#include "common/index/build_file_system.hpp"
#include "common/index/partition_format.hpp"
#include "common/index/word_positions.hpp"
#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp {

using namespace partition_format;

namespace {

std::string exact_float(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

std::string lengths_bytes(const std::vector<uint32_t>& lengths) {
  return std::string(reinterpret_cast<const char*>(lengths.data()), lengths.size() * sizeof(uint32_t));
}

}  // namespace

// A small write buffer (RocksDB's default is 1 MiB per file): a parallel build holds two files per
// partition and term range open at once.
rocksdb::EnvOptions sst_env_options() {
  rocksdb::EnvOptions env;
  env.writable_file_max_buffer_size = 256u << 10;
  return env;
}

struct SstRows::Writer {
  explicit Writer(int family) : options(build_options(family)), writer(sst_env_options(), options) {}
  // Through the build's file system: the file is synced with its partition (seal_partition).
  static rocksdb::Options build_options(int family) {
    rocksdb::Options options(rocksdb::DBOptions(), family_options(family));
    options.env = build_env();
    return options;
  }
  rocksdb::Options options;
  rocksdb::SstFileWriter writer;
};

namespace {
int family_index(SstRows::Family family) {
  switch (family) {
    case SstRows::Family::kMeta:
      return kMeta;
    case SstRows::Family::kLexicon:
      return kLexicon;
    case SstRows::Family::kPostings:
      return kPostings;
    case SstRows::Family::kDocuments:
      return kDocuments;
    case SstRows::Family::kStored:
      return kStored;
    case SstRows::Family::kPositions:
      return kPositions;
  }
  return kDefault;
}
}  // namespace

SstRows::SstRows(Family family, std::string path) : family_(family), path_(std::move(path)) {}
SstRows::~SstRows() = default;

void SstRows::put(std::string_view key, std::string_view value) {
  const bool long_list = family_ == Family::kPostings && value.size() >= kMinBlobBytes;
  if (long_list && done_.long_path.empty()) done_.long_path = path_ + "-long";
  std::unique_ptr<Writer>& writer = long_list ? long_writer_ : writer_;
  const std::string& path = long_list ? done_.long_path : path_;
  if (!writer) {
    writer = std::make_unique<Writer>(family_index(family_));
    check(writer->writer.Open(path), path, "creating the SST file");
  }
  check(writer->writer.Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size())), path,
        "writing a row");
  // Only the families the content checksum covers (lexicon, documents) keep a running CRC; the
  // postings are covered by each list's CRC in the lexicon and by the files' checksums.
  if (family_ == Family::kLexicon || family_ == Family::kDocuments)
    done_.crc = crc32_of(value, crc32_of(key, done_.crc));
  done_.bytes += key.size() + value.size();
  done_.value_bytes += value.size();
  if (long_list) {  // PartitionAssembly finds a range's ingested file by them
    if (done_.long_first_key.empty()) done_.long_first_key.assign(key);
    done_.long_last_key.assign(key);
  }
  ++done_.rows;
}

void SstRows::put_term(std::string_view term, const TermInfo& info, uint32_t list_crc, std::span<const Posting> tops,
                       std::span<const Score> rank_floors) {
  ByteWriter entry;
  entry.u32(info.df);
  entry.u64(info.cf);
  entry.u32(info.words);
  entry.u32(list_crc);
  if (tops.size() == kTermTops) {  // after the fields a reader of the first version reads: it skips them
    entry.u8(static_cast<uint8_t>(tops.size()));
    for (const Posting& top : tops) entry.u32(top.doc), entry.u32(top.freq);
    if (!rank_floors.empty()) {  // format version 2
      entry.u8(static_cast<uint8_t>(rank_floors.size()));
      for (const Score floor : rank_floors) entry.u32(std::bit_cast<uint32_t>(floor));
    }
  }
  put(term, entry.take());
}

void SstRows::put_list(std::string_view term, const uint32_t* words, uint32_t count) {
  put(term, std::string_view(reinterpret_cast<const char*>(words), size_t{count} * 4));
}

void SstRows::put_document(DocId doc, const DocumentRecord& record) {
  ByteWriter value;
  value.str(record.external_id);
  value.str(record.title);
  value.str(record.url);
  value.u32(record.length);
  put(doc_key(doc), value.take());
}

void SstRows::put_stored(DocId doc, const DocumentRecord& record) {
  if (!record.source.empty()) put(doc_key(doc), record.source);
}

SstRows::Done SstRows::finish() {
  if (writer_) {
    check(writer_->writer.Finish(), path_, "finishing the SST file");
    writer_.reset();
    done_.path = path_;
  }
  if (long_writer_) {
    check(long_writer_->writer.Finish(), done_.long_path, "finishing the SST file");
    long_writer_.reset();
  }
  return done_;
}

// Each partition's files are moved in by threads of its own (`movers`; none: by the caller), in
// the order the ranges arrive. Moved in by the back-end threads that encoded them, all partitions
// in the same order, the threads had queued on each database in turn (an ingestion takes RocksDB's
// write thread, CompactFiles waits until no ingestion runs) and sat idle there for a third of a
// range's time (H100, 16 threads: 4-6 of 16 busy); one mover per partition could not keep up with
// the compactions (0.6 s left to move after the last range was encoded).
struct PartitionAssembly::State {
  std::string dir;
  std::unique_ptr<OpenDb> db;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<SstRows::Done, SstRows::Done>> ranges;  // lexicon, postings: waiting to move in
  bool closing = false;
  std::exception_ptr failure;  // the first move that failed; the rest are skipped
  std::vector<std::thread> movers;
  size_t seal_threads = 1;              // reading the files for their checksums at the end: as many as movers
  std::atomic<uint64_t> list_bytes{0};  // every range's postings values: the meta row list_words (for older readers)

  void move_in(const SstRows::Done& lexicon, const SstRows::Done& postings);
  void run() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return closing || !ranges.empty(); });
      if (ranges.empty()) return;
      const auto [lexicon, postings] = std::move(ranges.front());
      ranges.pop_front();
      if (failure) continue;
      lock.unlock();
      try {
        move_in(lexicon, postings);
      } catch (...) {
        lock.lock();
        failure = std::current_exception();
      }
    }
  }
  // Waits until every range has moved in; rethrows the first failure.
  void drain() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      closing = true;
    }
    ready.notify_all();
    for (std::thread& mover : movers) mover.join();
    movers.clear();
    if (failure) std::rethrow_exception(failure);
  }
};

PartitionAssembly::PartitionAssembly(std::string dir, size_t movers) : state_(std::make_unique<State>()) {
  state_->dir = std::move(dir);
  if (std::filesystem::exists(std::filesystem::path(state_->dir) / "CURRENT")) {
    throw Error("partition " + state_->dir + " already exists; refusing to overwrite it");
  }
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.env = build_env();  // its syncs deferred to the seal (build_file_system.hpp)
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  // No compaction but the assembly's own: one picking a range's file meanwhile would make that
  // range's CompactFiles fail.
  std::vector<rocksdb::ColumnFamilyDescriptor> families = descriptors();
  for (auto& family : families) family.options.disable_auto_compactions = true;
  check(rocksdb::DB::Open(options, state_->dir, families, &handles, &raw), state_->dir, "cannot create RocksDB");
  state_->db = std::make_unique<OpenDb>();
  state_->db->db.reset(raw);
  state_->db->handles = handles;
  for (size_t i = 0; i < movers; ++i) state_->movers.emplace_back([state = state_.get()] { state->run(); });
  state_->seal_threads = std::max<size_t>(1, movers);
}

PartitionAssembly::~PartitionAssembly() {
  try {
    state_->drain();  // before the database closes
  } catch (...) {     // a failed build: its caller removes the directory
  }
}

void PartitionAssembly::add_terms(const SstRows::Done& lexicon, const SstRows::Done& postings) {
  state_->list_bytes += postings.value_bytes;
  if (state_->movers.empty()) return state_->move_in(lexicon, postings);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->failure) std::rethrow_exception(state_->failure);
    state_->ranges.emplace_back(lexicon, postings);
  }
  state_->ready.notify_one();
}

// The lexicon's file and the long lists' in one ingestion, then the long lists' file (found by its
// keys: the files of earlier ranges are there too, never in this range) compacted into itself on
// the last level, which moves its lists to blob files; then the short lists' file, which needs no
// compaction (it lands on the level above: its keys interleave with the long lists'). Compacting
// one file of both had rewritten every short list too: 9% of a one-thread build of 500,000 words,
// 15% at 5 million (development VM).
void PartitionAssembly::State::move_in(const SstRows::Done& lexicon, const SstRows::Done& postings) {
  rocksdb::DB& database = *db->db;
  const auto& handles = db->handles;
  const auto ingest = [&](std::initializer_list<std::pair<int, const std::string*>> files) {
    std::vector<rocksdb::IngestExternalFileArg> args;
    for (const auto& [family, path] : files) {
      if (path->empty()) continue;
      rocksdb::IngestExternalFileArg arg;
      arg.column_family = handles[family];
      arg.external_files = {*path};
      arg.options.move_files = true;
      args.push_back(std::move(arg));
    }
    if (!args.empty()) check(database.IngestExternalFiles(args), dir, "ingesting a term range");
  };
  if (postings.long_path.empty()) return ingest({{kLexicon, &lexicon.path}, {kPostings, &postings.path}});
  ingest({{kLexicon, &lexicon.path}, {kPostings, &postings.long_path}});
  rocksdb::ColumnFamilyMetaData meta;
  database.GetColumnFamilyMetaData(handles[kPostings], &meta);
  std::vector<std::string> range_files;
  for (const auto& level : meta.levels) {
    for (const auto& file : level.files) {
      if (file.smallestkey >= postings.long_first_key && file.largestkey <= postings.long_last_key)
        range_files.push_back(file.name);
    }
  }
  rocksdb::CompactionOptions compact;
  compact.compression = rocksdb::kDisableCompressionOption;  // the family's own setting
  compact.output_file_size_limit = 64u << 20;
  check(database.CompactFiles(compact, handles[kPostings], range_files, meta.levels.back().level), dir,
        "moving lists to blob files");
  ingest({{kPostings, &postings.path}});
}

void PartitionAssembly::finish(const PartitionMeta& meta, uint64_t term_count, const std::vector<uint32_t>& doc_lengths,
                               const std::vector<SstRows::Done>& lexicon, const std::vector<SstRows::Done>& documents,
                               const PartitionExtras& extra) {
  state_->drain();
  const std::string& dir = state_->dir;
  // The content checksum, in key order: lexicon rows (key, then value), document lengths, documents'
  // rows (as open_partition reads them).
  const std::string lengths = lengths_bytes(doc_lengths);
  uint32_t crc = 0;
  for (const auto& part : lexicon)
    crc = static_cast<uint32_t>(crc32_combine(crc, part.crc, static_cast<z_off_t>(part.bytes)));
  crc = crc32_of(lengths, crc);
  for (const auto& part : documents)
    crc = static_cast<uint32_t>(crc32_combine(crc, part.crc, static_cast<z_off_t>(part.bytes)));
  std::vector<std::pair<std::string, std::string>> meta_rows = {
      {"format_version", std::to_string(meta.format_version)},
      {"analyzer_version", meta.analyzer_version},
      {"generation", std::to_string(meta.generation)},
      {"partition_id", std::to_string(meta.partition_id)},
      {"partition_count", std::to_string(meta.partition_count)},
      {"doc_begin", std::to_string(meta.doc_begin)},
      {"doc_end", std::to_string(meta.doc_end)},
      {"codec", meta.codec},
      {"bm25_k1", exact_float(meta.bm25.k1)},
      {"bm25_b", exact_float(meta.bm25.b)},
      {"bm25_k3", exact_float(meta.bm25.k3)},
      {"doc_count", std::to_string(meta.stats.doc_count)},
      {"total_length", std::to_string(meta.stats.total_length)},
      {"posting_count", std::to_string(meta.posting_count)},
      {"term_count", std::to_string(term_count)},
      {"list_words", std::to_string(state_->list_bytes.load() / 4)},
      {"doc_lengths", lengths},
      {"content_crc", std::to_string(crc)}};
  if (!extra.columns.empty()) meta_rows.emplace_back("columns", extra.columns);  // its own CRC inside
  if (!extra.position_chunks.empty()) meta_rows.emplace_back("positions", position_chunks_text(extra.position_chunks));
  std::sort(meta_rows.begin(), meta_rows.end());
  SstRows meta_sst(SstRows::Family::kMeta, dir + "/ingest-meta.sst");
  for (const auto& [key, value] : meta_rows) meta_sst.put(key, value);
  const SstRows::Done meta_part = meta_sst.finish();

  rocksdb::DB& db = *state_->db->db;
  const auto& handles = state_->db->handles;
  rocksdb::IngestExternalFileOptions ingest;
  ingest.move_files = true;
  const auto ingest_parts = [&](int family, const std::vector<SstRows::Done>& parts) {
    std::vector<std::string> files;
    for (const auto& part : parts) {
      if (!part.path.empty()) files.push_back(part.path);
    }
    if (!files.empty())
      check(db.IngestExternalFile(handles[family], files, ingest), dir, "ingesting " + kFamilies[family]);
  };
  ingest_parts(kMeta, {meta_part});
  ingest_parts(kDocuments, documents);
  ingest_parts(kStored, extra.stored);
  ingest_parts(kPositions, extra.positions);
  state_->db.reset();  // closed: the files are final
  seal_partition(dir, state_->seal_threads);
}

// The view's rows through the streaming writers: lexicon and postings in term order.
void write_partition(const BuiltPartition& partition, const std::string& dir) {
  const IndexView& view = partition.view;
  if (std::filesystem::exists(dir)) throw Error("partition " + dir + " already exists; refusing to overwrite it");
  std::filesystem::create_directories(dir);
  std::vector<const std::pair<const std::string, TermInfo>*> terms;
  terms.reserve(view.lexicon.size());
  for (const auto& entry : view.lexicon) terms.push_back(&entry);
  std::sort(terms.begin(), terms.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  SstRows lexicon(SstRows::Family::kLexicon, dir + "/ingest-lexicon.sst");
  SstRows postings(SstRows::Family::kPostings, dir + "/ingest-postings.sst");
  SstRows documents(SstRows::Family::kDocuments, dir + "/ingest-documents.sst");
  SstRows stored(SstRows::Family::kStored, dir + "/ingest-stored.sst");
  SstRows positions(SstRows::Family::kPositions, dir + "/ingest-positions.sst");
  for (const auto* entry : terms) {
    const uint32_t* words = view.postings.data() + entry->second.offset;
    const uint32_t list_crc = crc32_of(words, size_t{entry->second.words} * 4);
    lexicon.put_term(entry->first, entry->second, list_crc, view.tops(entry->second), view.rank_floors(entry->second));
    postings.put_list(entry->first, words, entry->second.words);
  }
  for (size_t i = 0; i < partition.documents.size(); ++i) {
    documents.put_document(view.meta.doc_begin + static_cast<DocId>(i), partition.documents[i]);
    stored.put_stored(view.meta.doc_begin + static_cast<DocId>(i), partition.documents[i]);
  }
  PartitionAssembly assembly(dir);
  const SstRows::Done lexicon_part = lexicon.finish();
  assembly.add_terms(lexicon_part, postings.finish());
  PartitionExtras extra{{stored.finish()}, view.columns ? view.columns->serialize() : std::string(), {}, {}};
  if (view.positions) {
    view.positions->for_each_row([&](std::string_view key, std::string_view row) { positions.put(key, row); });
    extra.positions.push_back(positions.finish());
    extra.position_chunks = view.positions->chunks();
  }
  assembly.finish(view.meta, view.lexicon.size(), view.doc_lengths, {lexicon_part}, {documents.finish()}, extra);
}

uint64_t seal_partition(const std::string& dir, size_t threads) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && checksummed(entry.path().filename().string()))
      names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  // Reading every file is most of the build's last phase (a partition's few hundred MB of SST and
  // blob files at zlib's CRC speed): the files side by side. Each is then made durable: they were
  // written through the build's file system (build_file_system.hpp), whose syncs wait for this, and
  // most of their bytes are on the disk already (their writeback started as each closed). Only then
  // is the list written, so a listed partition's files are on the disk whatever stops the machine.
  std::vector<uint32_t> crcs(names.size());
  run_parallel_tasks(names.size(), std::max<size_t>(1, threads), [&](size_t i) {
    const std::string path = (fs::path(dir) / names[i]).string();
    crcs[i] = crc32_of_file(path);
    sync_file(path);
  });
  const fs::path staged = fs::path(dir) / (std::string(kChecksumsName) + ".tmp");
  {
    std::ofstream out(staged, std::ios::trunc);
    uint32_t list_crc = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      const std::string line =
          name + ' ' + std::to_string(fs::file_size(fs::path(dir) / name)) + ' ' + std::to_string(crcs[i]) + '\n';
      list_crc = crc32_of(line, list_crc);
      out << line;
    }
    out << "end " << names.size() << ' ' << list_crc << '\n';
    if (!out.flush()) throw Error("partition " + dir + ": cannot write " + kChecksumsName);
  }
  sync_file(staged.string());
  fs::rename(staged, fs::path(dir) / kChecksumsName);
  sync_directory(dir);
  return names.size();
}

std::map<std::string, std::pair<uint64_t, uint32_t>> sealed_checksums(const std::string& dir) {
  std::map<std::string, std::pair<uint64_t, uint32_t>> listed;
  std::ifstream in(std::filesystem::path(dir) / kChecksumsName);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    uint64_t size = 0;
    uint32_t crc = 0;
    if (line.rfind("end ", 0) == 0 || !(fields >> name >> size >> crc)) continue;
    listed[name] = {size, crc};
  }
  return listed;
}

}  // namespace warp
