// The on-disk layout every partition reader and writer shares, private to common/index: the
// column families and their options, keys, and the WARP-CHECKSUMS list. Users include
// partition_writer.hpp, partition_reader.hpp or partition_digest.hpp.
#pragma once
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <memory>
#include <string>
#include <vector>

#include "common/index/types.hpp"

namespace warp::partition_format {

// "default" spelled out: rocksdb::kDefaultColumnFamilyName may not be constructed yet at static init.
extern const std::vector<std::string> kFamilies;
// kStored: each document's stored form (stored_source.hpp), ZSTD-compressed in 4 KiB blocks; read
// per fetched hit, never loaded. Partitions written before it lack the family (readers of those
// builds open this one's partitions and ignore it: the format version stays).
// kPositions: word positions (word_positions.hpp), rows read per phrase query, never loaded;
// partitions built without positions, or before them, lack the family.
enum Family { kDefault = 0, kMeta, kLexicon, kPostings, kDocuments, kStored, kPositions };
// Postings values of this size and more go to blob files (SstRows writes them to a file of their own).
constexpr size_t kMinBlobBytes = 4096;
constexpr const char* kChecksumsName = "WARP-CHECKSUMS";

// One block cache per open partition, shared by its column families.
std::shared_ptr<rocksdb::TableFactory> table_factory_with_cache();
rocksdb::ColumnFamilyOptions family_options(int family, const std::shared_ptr<rocksdb::TableFactory>& tables = nullptr);
std::vector<rocksdb::ColumnFamilyDescriptor> descriptors(
    const std::shared_ptr<rocksdb::TableFactory>& tables = nullptr);
// A document's key: its docID big-endian, so that keys sort by docID.
std::string doc_key(DocId doc);
// Throws "partition DIR: WHAT: STATUS" unless `status` is ok.
void check(const rocksdb::Status& status, const std::string& dir, const std::string& what);

// The files that hold data: not RocksDB's info log (LOG, LOG.old.*), its LOCK, or the list itself.
bool checksummed(const std::string& name);
// Checks every file of DIR against DIR/WARP-CHECKSUMS (sizes and CRC-32s; no file missing or
// unlisted) before RocksDB reads a byte. Returns the listed files' bytes in all; throws, naming the
// partition and the file, on any difference.
uint64_t verify_files(const std::string& dir);

// An open RocksDB and its column families' handles, freed together.
struct OpenDb {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  OpenDb() = default;
  OpenDb(const OpenDb&) = delete;
  OpenDb& operator=(const OpenDb&) = delete;
  ~OpenDb() { close(); }
  void close() {
    for (auto* handle : handles)
      if (handle != nullptr) db->DestroyColumnFamilyHandle(handle);
    handles.clear();
    db.reset();
  }
};
// Opens DIR's database read-only with the partition's column families, `handles` by Family (a
// family the partition lacks: null; only kStored and kPositions may be); throws on failure. `families`: only those (and
// the default one); empty: all.
void open_read_only(const std::string& dir, const rocksdb::DBOptions& options,
                    const std::shared_ptr<rocksdb::TableFactory>& tables, OpenDb& out,
                    const std::vector<int>& families = {});

}  // namespace warp::partition_format
