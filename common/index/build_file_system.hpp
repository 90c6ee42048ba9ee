// The file system RocksDB writes a partition under construction through (PartitionAssembly's
// database, SstRows' SST files): its syncs are deferred to the seal, which makes every file of the
// finished partition durable at once (seal_partition).
//
// A build syncs each range's postings SST when it is written, again when it is ingested, then the
// blob and SST files its compaction makes of it, and the database's directory after each step: on
// the GPU machine's disk 0.2-0.5 s of a 2.2-3.5 s build of 2 GiB of text went to those waits (the
// same build under libeatmydata, every sync a no-op, was that much faster), the range SSTs' bytes
// written twice although the compaction deletes them. A partition half built is removed, never
// served, so nothing is lost by syncing only the finished one. Each file that stays in the
// partition (all but the range postings SSTs, which the compactions consume) has its writeback
// started when it is closed (sync_file_range, no wait), so the seal's syncs find most of it written.
#pragma once
#include <string>

namespace rocksdb {
class Env;
}

namespace warp {

// The build's Env (the default one's threads and clock, the deferring file system); lives as long
// as the process.
rocksdb::Env* build_env();

// Makes a file's data durable (fdatasync), or a directory's entries (fsync); throws Error naming it.
void sync_file(const std::string& path);
void sync_directory(const std::string& dir);

}  // namespace warp
