#include "common/index/partition_format.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp::partition_format {

const std::vector<std::string> kFamilies = {"default",   "meta",   "lexicon",  "postings",
                                            "documents", "stored", "positions"};

// One block cache per open partition, shared by its column families (16 MiB; the lists are copied
// into memory at load, so it serves document lookups), instead of RocksDB's default of a 32 MiB
// cache made per column family. Never shared between databases: copies of one partition carry the
// same file identities, so their blocks would share cache keys.
std::shared_ptr<rocksdb::TableFactory> table_factory_with_cache() {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(16u << 20);
  return std::shared_ptr<rocksdb::TableFactory>(rocksdb::NewBlockBasedTableFactory(table));
}

rocksdb::ColumnFamilyOptions family_options(int family, const std::shared_ptr<rocksdb::TableFactory>& tables) {
  rocksdb::ColumnFamilyOptions options;
  if (tables) options.table_factory = tables;
  // LZ4 for the other families' rows (terms and their statistics, document records): RocksDB's
  // default, Snappy, took 3.7-3.8% of a 16-thread build's back end on the H100 host, LZ4 3.0-3.3%.
  options.compression = rocksdb::kLZ4Compression;
  if (family == kStored) {
    // Whole documents, read one per fetched hit: ZSTD over 4 KiB blocks. On the default corpus
    // (43 MB of JSONL) 19.2 MB, a read 15 us at the median; 16 KiB blocks took 17.1 MB and 42 us
    // (a whole block decompressed for each read), LZ4 over 16 KiB 25 MB and 22 us
    // (tests/bench/results/snippets.md). Set here for the writers (SstFileWriter); a reader's table
    // factory reads any block size.
    options.compression = rocksdb::kZSTD;
    if (!tables) {
      rocksdb::BlockBasedTableOptions table;
      table.block_size = 4u << 10;
      options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    }
  }
  if (family == kPositions) options.compression = rocksdb::kNoCompression;  // bit-packed already
  if (family == kPostings) {
    options.enable_blob_files = true;  // long lists live in blob files, out of the LSM tree
    options.min_blob_size = kMinBlobBytes;
    options.compression = rocksdb::kNoCompression;  // lists are compressed already
    options.blob_compression_type = rocksdb::kNoCompression;
  }
  return options;
}

std::vector<rocksdb::ColumnFamilyDescriptor> descriptors(const std::shared_ptr<rocksdb::TableFactory>& tables) {
  std::vector<rocksdb::ColumnFamilyDescriptor> result;
  for (size_t i = 0; i < kFamilies.size(); ++i)
    result.emplace_back(kFamilies[i], family_options(static_cast<int>(i), tables));
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

bool checksummed(const std::string& name) {
  return name != kChecksumsName && name != "LOCK" && name.rfind("LOG", 0) != 0;
}

uint64_t verify_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::ifstream in(fs::path(dir) / kChecksumsName);
  if (!in) {
    throw Error("partition " + dir + ": no " + kChecksumsName +
                " (not a partition, or written by an older Warpsearch: build it again)");
  }
  // The list ends with "end N CRC": N entries, CRC-32 of the lines before it. A damaged or cut list
  // is refused, so no file escapes the check.
  const auto damaged = [&](const std::string& why) {
    return Error("partition " + dir + ": " + kChecksumsName + " is damaged (" + why + ")");
  };
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
    if (entry.is_regular_file() && checksummed(file) && file != std::string(kChecksumsName) + ".tmp")
      listed_names.insert(file);
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
      throw Error("partition " + dir + ": file " + file.name + " has " + std::to_string(actual) + " bytes, " +
                  kChecksumsName + " says " + std::to_string(size) + " (truncated?)");
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
    if (actual[i] != listed[i].crc)
      throw Error("partition " + dir + ": checksum mismatch in file " + listed[i].name + " (damaged)");
  }
  if (listed.empty()) throw damaged("no files listed");
  if (!listed_names.empty())
    throw Error("partition " + dir + ": file " + *listed_names.begin() + " is not in " + kChecksumsName);
  return file_bytes;
}

void open_read_only(const std::string& dir, const rocksdb::DBOptions& options,
                    const std::shared_ptr<rocksdb::TableFactory>& tables, OpenDb& out,
                    const std::vector<int>& families) {
  // The families the partition has: one written before the stored family lacks it.
  std::vector<std::string> present;
  rocksdb::DB::ListColumnFamilies(options, dir, &present);  // on failure, the open below says why
  std::vector<rocksdb::ColumnFamilyDescriptor> wanted;
  std::vector<int> slots;
  for (size_t i = 0; i < kFamilies.size(); ++i) {
    const int family = static_cast<int>(i);
    const bool asked =
        family == kDefault || families.empty() || std::find(families.begin(), families.end(), family) != families.end();
    const bool there = std::find(present.begin(), present.end(), kFamilies[i]) != present.end();
    if (!asked || ((family == kStored || family == kPositions) && !there && !present.empty())) continue;
    wanted.emplace_back(kFamilies[i], family_options(family, tables));
    slots.push_back(family);
  }
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> opened;
  check(rocksdb::DB::OpenForReadOnly(options, dir, wanted, &opened, &raw), dir,
        "cannot open as a Warpsearch partition (RocksDB)");
  out.db.reset(raw);
  out.handles.assign(kFamilies.size(), nullptr);
  for (size_t i = 0; i < slots.size(); ++i) out.handles[static_cast<size_t>(slots[i])] = opened[i];
}

}  // namespace warp::partition_format
