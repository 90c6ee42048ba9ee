#include "common/index/partition_store.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
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
#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

// "default" spelled out: rocksdb::kDefaultColumnFamilyName may not be constructed yet at static init.
const std::vector<std::string> kFamilies = {"default", "meta", "lexicon", "postings",
                                            "documents"};
enum Family { kDefault = 0, kMeta, kLexicon, kPostings, kDocuments };
// Postings values of this size and more go to blob files (SstRows writes them to a file of their own).
constexpr size_t kMinBlobBytes = 4096;

// One block cache per open partition, shared by its column families (16 MiB; the lists are copied
// into memory at load, so it serves document lookups), instead of RocksDB's default of a 32 MiB
// cache made per column family. Never shared between databases: copies of one partition carry the
// same file identities, so their blocks would share cache keys.
std::shared_ptr<rocksdb::TableFactory> table_factory_with_cache() {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(16u << 20);
  return std::shared_ptr<rocksdb::TableFactory>(rocksdb::NewBlockBasedTableFactory(table));
}

rocksdb::ColumnFamilyOptions family_options(int family, const std::shared_ptr<rocksdb::TableFactory>& tables = nullptr) {
  rocksdb::ColumnFamilyOptions options;
  if (tables) options.table_factory = tables;
  // LZ4 for the other families' rows (terms and their statistics, document records): RocksDB's
  // default, Snappy, took 3.7-3.8% of a 16-thread build's back end on the H100 host, LZ4 3.0-3.3%.
  options.compression = rocksdb::kLZ4Compression;
  if (family == kPostings) {
    options.enable_blob_files = true;  // long lists live in blob files, out of the LSM tree
    options.min_blob_size = kMinBlobBytes;
    options.compression = rocksdb::kNoCompression;  // lists are compressed already
    options.blob_compression_type = rocksdb::kNoCompression;
  }
  return options;
}

std::vector<rocksdb::ColumnFamilyDescriptor> descriptors(const std::shared_ptr<rocksdb::TableFactory>& tables = nullptr) {
  std::vector<rocksdb::ColumnFamilyDescriptor> result;
  for (size_t i = 0; i < kFamilies.size(); ++i) result.emplace_back(kFamilies[i], family_options(static_cast<int>(i), tables));
  return result;
}

std::string doc_key(DocId doc) {
  std::string key(4, '\0');
  for (int i = 0; i < 4; ++i) key[i] = static_cast<char>(doc >> (24 - 8 * i));
  return key;
}

void check(const rocksdb::Status& status, const std::string& dir, const std::string& what) {
  if (!status.ok()) throw Error("partition " + dir + ": " + what + ": " + status.ToString());
}

std::string exact_float(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

std::string lengths_bytes(const std::vector<uint32_t>& lengths) {
  return std::string(reinterpret_cast<const char*>(lengths.data()), lengths.size() * sizeof(uint32_t));
}

}  // namespace

struct Partition::Db {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  ~Db() {
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
  }
};

Partition::~Partition() = default;

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
    case SstRows::Family::kMeta: return kMeta;
    case SstRows::Family::kLexicon: return kLexicon;
    case SstRows::Family::kPostings: return kPostings;
    case SstRows::Family::kDocuments: return kDocuments;
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
  check(writer->writer.Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size())), path, "writing a row");
  // Only the families the content checksum covers (lexicon, documents) keep a running CRC; the
  // postings are covered by each list's CRC in the lexicon and by the files' checksums.
  if (family_ == Family::kLexicon || family_ == Family::kDocuments) done_.crc = crc32_of(value, crc32_of(key, done_.crc));
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
  std::unique_ptr<Partition::Db> db;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<SstRows::Done, SstRows::Done>> ranges;  // lexicon, postings: waiting to move in
  bool closing = false;
  std::exception_ptr failure;  // the first move that failed; the rest are skipped
  std::vector<std::thread> movers;
  size_t seal_threads = 1;  // reading the files for their checksums at the end: as many as movers
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
  state_->db = std::make_unique<Partition::Db>();
  state_->db->db.reset(raw);
  state_->db->handles = handles;
  for (size_t i = 0; i < movers; ++i) state_->movers.emplace_back([state = state_.get()] { state->run(); });
  state_->seal_threads = std::max<size_t>(1, movers);
}

PartitionAssembly::~PartitionAssembly() {
  try {
    state_->drain();  // before the database closes
  } catch (...) {  // a failed build: its caller removes the directory
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
      if (file.smallestkey >= postings.long_first_key && file.largestkey <= postings.long_last_key) range_files.push_back(file.name);
    }
  }
  rocksdb::CompactionOptions compact;
  compact.compression = rocksdb::kDisableCompressionOption;  // the family's own setting
  compact.output_file_size_limit = 64u << 20;
  check(database.CompactFiles(compact, handles[kPostings], range_files, meta.levels.back().level), dir, "moving lists to blob files");
  ingest({{kPostings, &postings.path}});
}

void PartitionAssembly::finish(const PartitionMeta& meta, uint64_t term_count, const std::vector<uint32_t>& doc_lengths,
                               const std::vector<SstRows::Done>& lexicon, const std::vector<SstRows::Done>& documents) {
  state_->drain();
  const std::string& dir = state_->dir;
  // The content checksum, in key order: lexicon rows (key, then value), document lengths, documents'
  // rows (as open_partition reads them).
  const std::string lengths = lengths_bytes(doc_lengths);
  uint32_t crc = 0;
  for (const auto& part : lexicon) crc = static_cast<uint32_t>(crc32_combine(crc, part.crc, static_cast<z_off_t>(part.bytes)));
  crc = crc32_of(lengths, crc);
  for (const auto& part : documents) crc = static_cast<uint32_t>(crc32_combine(crc, part.crc, static_cast<z_off_t>(part.bytes)));
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
    if (!files.empty()) check(db.IngestExternalFile(handles[family], files, ingest), dir, "ingesting " + kFamilies[family]);
  };
  ingest_parts(kMeta, {meta_part});
  ingest_parts(kDocuments, documents);
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
  for (const auto* entry : terms) {
    const uint32_t* words = view.postings.data() + entry->second.offset;
    const uint32_t list_crc = crc32_of(words, size_t{entry->second.words} * 4);
    lexicon.put_term(entry->first, entry->second, list_crc, view.tops(entry->second), view.rank_floors(entry->second));
    postings.put_list(entry->first, words, entry->second.words);
  }
  for (size_t i = 0; i < partition.documents.size(); ++i) {
    documents.put_document(view.meta.doc_begin + static_cast<DocId>(i), partition.documents[i]);
  }
  PartitionAssembly assembly(dir);
  const SstRows::Done lexicon_part = lexicon.finish();
  assembly.add_terms(lexicon_part, postings.finish());
  assembly.finish(view.meta, view.lexicon.size(), view.doc_lengths, {lexicon_part}, {documents.finish()});
}

namespace {

constexpr const char* kChecksumsName = "WARP-CHECKSUMS";

// The files that hold data: not RocksDB's info log (LOG, LOG.old.*), its LOCK, or the list itself.
bool checksummed(const std::string& name) {
  return name != kChecksumsName && name != "LOCK" && name.rfind("LOG", 0) != 0;
}

// Returns the listed files' bytes in all.
uint64_t verify_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::ifstream in(fs::path(dir) / kChecksumsName);
  if (!in) {
    throw Error("partition " + dir + ": no " + kChecksumsName +
                " (not a partition, or written by an older Warpsearch: build it again)");
  }
  // The list ends with "end N CRC": N entries, CRC-32 of the lines before it. A damaged or cut list
  // is refused, so no file escapes the check.
  const auto damaged = [&](const std::string& why) { return Error("partition " + dir + ": " + kChecksumsName + " is damaged (" + why + ")"); };
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) throw damaged("empty");
  uint32_t list_crc = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) list_crc = crc32_of(lines[i] + "\n", list_crc);
  {
    std::istringstream trailer(lines.back());
    std::string word;
    size_t count = 0;
    uint32_t crc = 0;
    if (!(trailer >> word >> count >> crc) || word != "end") throw damaged("no end line");
    if (count != lines.size() - 1 || crc != list_crc) throw damaged("entries or checksum differ from its end line");
  }
  lines.pop_back();
  std::set<std::string> listed_names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file() && checksummed(file) && file != std::string(kChecksumsName) + ".tmp") listed_names.insert(file);
  }
  struct Listed {
    std::string name;
    uint32_t crc = 0;
  };
  std::vector<Listed> listed;
  uint64_t file_bytes = 0;
  for (const std::string& line : lines) {
    std::istringstream fields(line);
    Listed file;
    uint64_t size = 0;
    if (!(fields >> file.name >> size >> file.crc) || file.name.find('/') != std::string::npos || file.name == "..") {
      throw damaged("entry " + std::to_string(listed.size() + 1));
    }
    listed_names.erase(file.name);
    std::error_code error;
    const uint64_t actual = fs::file_size(fs::path(dir) / file.name, error);
    if (error) throw Error("partition " + dir + ": file " + file.name + " is missing");
    if (actual != size) {
      throw Error("partition " + dir + ": file " + file.name + " has " + std::to_string(actual) + " bytes, " + kChecksumsName +
                  " says " + std::to_string(size) + " (truncated?)");
    }
    listed.push_back(std::move(file));
    file_bytes += size;
  }
  // The files' CRCs side by side (a one-partition leaf had read them one after another), the first
  // mismatch in the list's order reported.
  std::vector<uint32_t> actual(listed.size());
  run_parallel_tasks(listed.size(), std::min<size_t>(listed.size(), std::max(1u, std::thread::hardware_concurrency())),
                     [&](size_t i) { actual[i] = crc32_of_file((fs::path(dir) / listed[i].name).string()); });
  for (size_t i = 0; i < listed.size(); ++i) {
    if (actual[i] != listed[i].crc) throw Error("partition " + dir + ": checksum mismatch in file " + listed[i].name + " (damaged)");
  }
  if (listed.empty()) throw damaged("no files listed");
  if (!listed_names.empty()) throw Error("partition " + dir + ": file " + *listed_names.begin() + " is not in " + kChecksumsName);
  return file_bytes;
}

}  // namespace

uint64_t seal_partition(const std::string& dir, size_t threads) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && checksummed(entry.path().filename().string())) names.push_back(entry.path().filename().string());
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
      const std::string line = name + ' ' + std::to_string(fs::file_size(fs::path(dir) / name)) + ' ' + std::to_string(crcs[i]) + '\n';
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

std::unique_ptr<Partition> open_partition(const std::string& dir, const OpenOptions& options) {
  if (!std::filesystem::is_directory(dir)) throw Error("partition " + dir + ": no such directory");
  const uint64_t file_bytes = verify_files(dir);
  rocksdb::DBOptions db_options;
  db_options.max_open_files = 64;
  // A partition holds one SST file per column family (ingested): opening them needs no pool of 16
  // threads started and joined per open, the default.
  db_options.max_file_opening_threads = 1;
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  check(rocksdb::DB::OpenForReadOnly(db_options, dir, descriptors(table_factory_with_cache()), &handles, &raw), dir,
        "cannot open as a Warpsearch partition (RocksDB)");
  // Closed again when the partition is read: everything it serves is held in memory.
  Partition::Db opened;
  opened.db.reset(raw);
  opened.handles = handles;
  std::unique_ptr<Partition> partition(new Partition());
  partition->path_ = dir;
  rocksdb::DB* db = raw;
  rocksdb::ReadOptions read;
  read.verify_checksums = true;

  const auto meta_field = [&](const std::string& key) {
    std::string value;
    rocksdb::Status status = db->Get(read, handles[kMeta], key, &value);
    if (status.IsNotFound()) throw Error("partition " + dir + ": metadata field '" + key + "' is missing (not a complete partition)");
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
  IndexView& view = partition->view_;
  PartitionMeta& meta = view.meta;
  meta.format_version = static_cast<uint32_t>(number("format_version"));
  if (meta.format_version < kOldestFormatVersion || meta.format_version > kFormatVersion) {
    throw Error("partition " + dir + ": format version " + std::to_string(meta.format_version) + ", this build reads versions " +
                std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) +
                (meta.format_version > kFormatVersion ? "; upgrade this service, or rebuild the index with this build" : "; rebuild the index"));
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
    if (text.empty() || *end != '\0') throw Error("partition " + dir + ": metadata field '" + key + "' is not a number");
    return v;
  };
  meta.bm25.k1 = real("bm25_k1");
  meta.bm25.b = real("bm25_b");
  if (has_meta_field("bm25_k3")) meta.bm25.k3 = real("bm25_k3");  // query-time: older partitions lack it
  meta.stats.doc_count = number("doc_count");
  meta.stats.total_length = number("total_length");
  meta.posting_count = number("posting_count");
  const uint64_t term_count = number("term_count");
  const std::string doc_lengths = meta_field("doc_lengths");
  if (meta.doc_end < meta.doc_begin || doc_lengths.size() != size_t{meta.doc_end - meta.doc_begin} * 4) {
    throw Error("partition " + dir + ": document lengths do not match the docID range");
  }
  view.doc_lengths.resize(meta.doc_end - meta.doc_begin);
  std::memcpy(view.doc_lengths.data(), doc_lengths.data(), doc_lengths.size());

  // The content CRC (the lexicon's rows, the document lengths, the documents' rows, as
  // PartitionAssembly::finish wrote it) takes the lexicon's rows as the loop below reads them: a
  // pass of its own over the lexicon had been a sixth of an open. It is checked before the
  // documents are parsed; the lexicon's rows have their own checks (each list's CRC, its structure).
  const uint32_t expected_crc = static_cast<uint32_t>(number("content_crc"));

  // Lexicon and postings are both in term order: each term range is read side by side with the
  // others, in two passes. A one-partition leaf (the Kubernetes layout) had opened on one thread:
  // ~1.7 s for 300 MB on the H100 host, minutes for a GOV2-sized partition.
  const size_t threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::vector<std::string> bounds = lexicon_range_bounds(db, threads);
  const size_t range_count = bounds.size() + 1;
  struct TermRange {
    std::vector<std::string> terms;
    std::vector<TermInfo> infos;
    std::vector<uint32_t> list_crcs;
    std::vector<Posting> tops;  // its terms' best postings (TermInfo::tops indexes them here first)
    std::vector<Score> rank_floors;  // its terms' rank floors (TermInfo::ranks, the same)
    uint32_t crc = 0;        // of its lexicon rows, as the content CRC chains them, from 0
    uint64_t crc_bytes = 0;  // the bytes that CRC covers
    uint64_t words = 0;      // its lists' words
    std::string error;       // the first thing wrong in it (reported for the first such range)
  };
  std::vector<TermRange> term_ranges(range_count);
  const auto lower = [&](size_t r) { return r == 0 ? nullptr : &bounds[r - 1]; };
  const auto upper = [&](size_t r) { return r + 1 < range_count ? &bounds[r] : nullptr; };
  const auto in_range = [&](const rocksdb::Iterator& it, size_t r) {
    return it.Valid() && (upper(r) == nullptr || it.key().compare(rocksdb::Slice(*upper(r))) < 0);
  };
  const auto seek = [&](rocksdb::Iterator& it, size_t r) {
    if (lower(r) == nullptr) {
      it.SeekToFirst();
    } else {
      it.Seek(*lower(r));
    }
  };
  const auto each_range = [&](const std::function<void(size_t, TermRange&)>& work) {
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
  };
  // Pass 1: each range's lexicon rows (terms, their entries, the content CRC's part, the words).
  each_range([&](size_t r, TermRange& range) {
    std::unique_ptr<rocksdb::Iterator> lexicon(db->NewIterator(read, handles[kLexicon]));
    for (seek(*lexicon, r); in_range(*lexicon, r); lexicon->Next()) {
      const std::string_view key = lexicon->key().ToStringView(), value = lexicon->value().ToStringView();
      range.crc = crc32_of(value, crc32_of(key, range.crc));
      range.crc_bytes += key.size() + value.size();
      // The context of a ByteReader's error is a string of its own: built for a short entry only,
      // not for each of millions of terms.
      constexpr size_t kEntryBytes = 4 + 8 + 4 + 4;
      const std::string_view fields = value.size() >= kEntryBytes ? value : std::string_view();
      ByteReader entry(fields.empty() ? value : fields,
                       fields.empty() ? "partition " + dir + ": lexicon entry '" + std::string(key) + "'" : std::string());
      TermInfo info;
      info.df = entry.u32();
      info.cf = entry.u64();
      info.words = entry.u32();
      range.list_crcs.push_back(entry.u32());
      if (!entry.done()) {  // the term's best postings: checked, a damaged one must not reach a search
        const auto damaged = [&](const char* what) {
          return Error("partition " + dir + ": damaged lexicon entry of term '" + std::string(key) + "' (" + what + ")");
        };
        if (entry.u8() != kTermTops || entry.remaining() < kTermTops * 8) throw damaged("its best postings");
        info.tops = static_cast<uint32_t>(range.tops.size());
        for (uint32_t t = 0; t < kTermTops; ++t) {
          const DocId doc = entry.u32();
          const TermFreq freq = entry.u32();
          if (doc < view.meta.doc_begin || doc >= view.meta.doc_end || freq == 0) throw damaged("a best posting outside the partition");
          range.tops.push_back({doc, freq});
        }
        if (!entry.done()) {  // its rank floors (format version 2): non-negative, none above the one before
          const uint32_t count = entry.u8();
          if (view.meta.format_version < 2 || count == 0 || count > kRankFloors.size() || entry.remaining() != count * 4) {
            throw damaged("its rank floors");
          }
          info.ranks = static_cast<uint32_t>(range.rank_floors.size());
          info.rank_count = count;
          for (uint32_t r = 0; r < count; ++r) {
            const Score floor = std::bit_cast<Score>(entry.u32());
            if (!(floor >= 0) || std::isinf(floor) || (r > 0 && floor > range.rank_floors.back())) throw damaged("its rank floors");
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
  for (TermRange& range : term_ranges) {
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
  if (words > file_bytes / 4) throw Error("partition " + dir + ": the lexicon's lists are longer than the partition's files (damaged)");
  view.postings.resize(words + kReadPaddingWords, 0);
  // Pass 2: each range's lists, checked and copied to their places.
  each_range([&](size_t r, TermRange& range) {
    std::unique_ptr<rocksdb::Iterator> postings(db->NewIterator(read, handles[kPostings]));
    seek(*postings, r);
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
  uint32_t crc = 0;
  for (const TermRange& range : term_ranges) crc = static_cast<uint32_t>(crc32_combine(crc, range.crc, static_cast<z_off_t>(range.crc_bytes)));
  crc = crc32_of(doc_lengths, crc);
  if (terms_read != term_count) throw Error("partition " + dir + ": lexicon holds fewer terms than recorded");
  // Grown term by term, the lexicon's rehashes were a tenth of an open; the count is the meta row's,
  // so a damaged one is not trusted beyond 2^24 terms (the map grows past that as before).
  view.lexicon.reserve(std::min<uint64_t>(term_count, uint64_t{1} << 24));
  std::vector<const std::pair<const std::string, TermInfo>*> entries;  // the map's entries as read
  entries.reserve(std::min<uint64_t>(term_count, uint64_t{1} << 24));
  for (TermRange& range : term_ranges) {
    for (size_t i = 0; i < range.terms.size(); ++i) {
      const auto [kept, added] = view.lexicon.emplace(std::move(range.terms[i]), range.infos[i]);
      if (added) entries.push_back(&*kept);
    }
    range = TermRange{};  // its memory for the next range's nodes
  }
  if (view.lexicon.size() != term_count) throw Error("partition " + dir + ": lexicon holds fewer terms than recorded");
  // Structure check of every list, in the order read (the map's nodes were allocated in that
  // order: walked by bucket, each was a cache miss), slices of it side by side.
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

  std::unique_ptr<rocksdb::Iterator> documents(db->NewIterator(read, handles[kDocuments]));
  view.external_ids.reserve(view.doc_lengths.size());
  partition->stored_ends_.reserve(view.doc_lengths.size());
  // The documents' rows complete the content CRC before any is parsed (a few bytes each, few beside
  // the lexicon's terms: a pass of their own costs little).
  for (documents->SeekToFirst(); documents->Valid(); documents->Next()) {
    crc = crc32_of(documents->key().ToStringView(), crc);
    crc = crc32_of(documents->value().ToStringView(), crc);
  }
  check(documents->status(), dir, "reading documents");
  if (crc != expected_crc) throw Error("partition " + dir + ": content checksum mismatch (the partition is corrupt)");
  for (documents->SeekToFirst(); documents->Valid(); documents->Next()) {
    const std::string_view record = documents->value().ToStringView();
    ByteReader value(record, "partition " + dir + ": document record");
    view.external_ids.push_back(value.str());
    const size_t rest = record.size() - value.remaining();
    value.str(), value.str(), value.u32();  // title, url, length: well formed?
    partition->stored_.append(record.substr(rest));
    partition->stored_ends_.push_back(partition->stored_.size());
  }
  check(documents->status(), dir, "reading documents");
  if (view.external_ids.size() != view.doc_lengths.size()) throw Error("partition " + dir + ": document records missing");

  view.compute_length_norms();
  view.rescore(options.bm25.applied_to(view.meta.bm25));
  return partition;
}

std::vector<std::string> partition_digest(const std::string& dir) {
  verify_files(dir);
  rocksdb::DBOptions options;
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  check(rocksdb::DB::OpenForReadOnly(options, dir, descriptors(), &handles, &raw), dir, "cannot open as a Warpsearch partition (RocksDB)");
  Partition::Db db;
  db.db.reset(raw);
  db.handles = handles;
  std::vector<std::string> lines;
  for (int family : {kMeta, kLexicon, kPostings, kDocuments}) {
    uint64_t rows = 0, bytes = 0;
    uint32_t crc = 0;
    std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions(), handles[family]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      for (const rocksdb::Slice& part : {it->key(), it->value()}) {
        const uint64_t size = part.size();
        crc = crc32_of(part.data(), part.size(), crc32_of(&size, sizeof size, crc));
        bytes += size;
      }
      ++rows;
    }
    check(it->status(), dir, "reading " + kFamilies[family]);
    lines.push_back(kFamilies[family] + " " + std::to_string(rows) + " " + std::to_string(bytes) + " " + std::to_string(crc));
  }
  return lines;
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
