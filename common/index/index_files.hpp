// An index directory: one subdirectory per partition plus manifest.json naming the generation and
// its partitions. Every tool that takes --index accepts such a directory (all its partitions) or
// one partition directory.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/index/partition_store.hpp"

namespace warp {

inline constexpr const char* kManifestName = "manifest.json";

// Writes every partition as DIR/part-NNNN and then DIR/manifest.json (the manifest last, so a
// directory with a manifest is complete).
void write_index(const std::vector<BuiltPartition>& partitions, const std::string& dir);

// DIR/part-NNNN: where partition `id` of an index directory lives.
std::string partition_dir_name(uint32_t id);

// Writes DIR/manifest.json for partitions already written in DIR (atomically: a temporary file
// renamed), with each partition's files, sizes and CRCs.
struct ManifestPartition {
  PartitionMeta meta;
  uint64_t terms = 0;
};
void write_manifest(const std::string& dir, const std::vector<ManifestPartition>& partitions);

// Opens the partitions of an index directory (all, or those in options.partitions; the others need
// not be on disk), or the single partition at `path`. Checks that they belong to the manifest's
// generation and, when all are opened, that they cover its docID range without gaps or overlaps.
std::vector<std::unique_ptr<Partition>> open_index(const std::string& path, const OpenOptions& options = {});

}  // namespace warp
