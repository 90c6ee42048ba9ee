// A partition's content digest: for comparing builds (the same rows, whatever RocksDB's own file
// metadata), used by `warp-indexer digest` and the tests.
#pragma once
#include <string>
#include <vector>

namespace warp {

// REQUIRES: a sealed partition; its files are verified first (throws as open_partition does).
// The partition's content as one line per column family, "<family> <rows> <bytes> <crc32>" (the
// CRC over every key and value with their lengths, in key order): two partitions with equal
// digests hold the same rows, whatever RocksDB's own file metadata (ids, times, file numbers).
std::vector<std::string> partition_digest(const std::string& dir);

}  // namespace warp
