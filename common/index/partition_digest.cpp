#include "common/index/partition_digest.hpp"

#include <rocksdb/db.h>

#include "common/index/partition_format.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp {

using namespace partition_format;

std::vector<std::string> partition_digest(const std::string& dir) {
  verify_files(dir);
  OpenDb db;
  open_read_only(dir, rocksdb::DBOptions(), nullptr, db);
  rocksdb::DB* raw = db.db.get();
  const auto& handles = db.handles;
  std::vector<std::string> lines;
  for (int family : {kMeta, kLexicon, kPostings, kDocuments, kStored, kPositions}) {
    if (handles[family] == nullptr) continue;  // no stored or positions family (an older partition)
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
    lines.push_back(kFamilies[family] + " " + std::to_string(rows) + " " + std::to_string(bytes) + " " +
                    std::to_string(crc));
  }
  return lines;
}

}  // namespace warp
