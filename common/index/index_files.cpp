#include "common/index/index_files.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/index/build_file_system.hpp"
#include "common/util/checksum.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace fs = std::filesystem;

namespace {
// Every file of a partition directory with its size and CRC-32, in name order. The CRCs the
// partition's seal computed moments before are taken from its WARP-CHECKSUMS (reading every file
// again had run on one thread after the parallel back end: ~1% of a one-thread build's samples on
// the development VM, which at sixteen threads would be several percent of the wall time).
nlohmann::json partition_files(const fs::path& dir) {
  const auto sealed = sealed_checksums(dir.string());
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  nlohmann::json files = nlohmann::json::array();
  for (const fs::path& path : paths) {
    const uint64_t size = fs::file_size(path);
    const auto listed = sealed.find(path.filename().string());
    const uint32_t crc =
        listed != sealed.end() && listed->second.first == size ? listed->second.second : crc32_of_file(path.string());
    files.push_back({{"name", path.filename().string()}, {"size", size}, {"crc32", crc}});
  }
  return files;
}
}  // namespace

std::string partition_dir_name(uint32_t id) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%04u", id);
  return name;
}

void write_index(const std::vector<BuiltPartition>& partitions, const std::string& dir) {
  if (fs::exists(fs::path(dir) / kManifestName))
    throw Error("index " + dir + " already exists; refusing to overwrite it");
  fs::create_directories(dir);
  // Partitions are independent RocksDB databases: write them in parallel.
  run_parallel_tasks(partitions.size(), partitions.size(), [&](size_t i) {
    write_partition(partitions[i], (fs::path(dir) / partition_dir_name(partitions[i].view.meta.partition_id)).string());
  });
  std::vector<ManifestPartition> written;
  for (const BuiltPartition& partition : partitions)
    written.push_back({partition.view.meta, partition.view.lexicon.size()});
  write_manifest(dir, written);
}

void write_manifest(const std::string& dir, const std::vector<ManifestPartition>& partitions) {
  nlohmann::json manifest;
  nlohmann::json parts = nlohmann::json::array();
  uint64_t postings = 0;
  for (const ManifestPartition& partition : partitions) {
    const PartitionMeta& meta = partition.meta;
    const std::string name = partition_dir_name(meta.partition_id);
    parts.push_back({{"id", meta.partition_id},
                     {"path", name},
                     {"doc_begin", meta.doc_begin},
                     {"doc_end", meta.doc_end},
                     {"postings", meta.posting_count},
                     {"terms", partition.terms},
                     {"files", partition_files(fs::path(dir) / name)}});
    postings += meta.posting_count;
  }
  const PartitionMeta& first = partitions.front().meta;
  manifest["format_version"] = first.format_version;
  manifest["generation"] = first.generation;
  manifest["analyzer"] = first.analyzer_version;
  manifest["codec"] = first.codec;
  manifest["documents"] = first.stats.doc_count;
  manifest["postings"] = postings;
  manifest["partitions"] = parts;
  const fs::path tmp = fs::path(dir) / (std::string(kManifestName) + ".tmp");
  {
    std::ofstream out(tmp);
    out << manifest.dump(2) << "\n";
    if (!out.flush()) throw Error("index " + dir + ": cannot write the manifest");
  }
  sync_file(tmp.string());  // the partitions are durable (seal_partition); the manifest names them
  fs::rename(tmp, fs::path(dir) / kManifestName);
  sync_directory(dir);
}

std::vector<std::unique_ptr<Partition>> open_index(const std::string& path, const OpenOptions& options) {
  std::vector<std::unique_ptr<Partition>> partitions;
  const fs::path manifest_path = fs::path(path) / kManifestName;
  if (!fs::exists(manifest_path)) {
    if (!fs::exists(fs::path(path) / "CURRENT")) {
      throw Error(path + " is neither an index directory (no " + kManifestName + ") nor a partition");
    }
    partitions.push_back(open_partition(path, options));
    return partitions;
  }
  nlohmann::json manifest;
  std::vector<std::string> partition_dirs;
  try {
    std::ifstream in(manifest_path);
    manifest = nlohmann::json::parse(in);
    for (const auto& entry : manifest.at("partitions")) {
      const uint32_t id = entry.at("id").get<uint32_t>();
      if (!options.partitions.empty() &&
          std::find(options.partitions.begin(), options.partitions.end(), id) == options.partitions.end()) {
        continue;
      }
      const fs::path partition_dir = fs::path(path) / entry.at("path").get<std::string>();
      // Missing or truncated files are named here; bit flips are caught by RocksDB's and our CRCs.
      for (const auto& file : entry.value("files", nlohmann::json::array())) {
        const fs::path file_path = partition_dir / file.at("name").get<std::string>();
        if (file.at("name") == "LOCK") continue;
        if (!fs::exists(file_path)) throw Error("index " + path + ": file " + file_path.string() + " is missing");
        if (fs::file_size(file_path) != file.at("size").get<uint64_t>()) {
          throw Error("index " + path + ": file " + file_path.string() + " has " +
                      std::to_string(fs::file_size(file_path)) + " bytes, the manifest says " +
                      std::to_string(file.at("size").get<uint64_t>()) + " (truncated?)");
        }
      }
      partition_dirs.push_back(partition_dir.string());
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("index " + path + ": malformed manifest: " + e.what());
  }
  // Partitions are independent databases, each read whole into memory and checked: side by side,
  // as many at once as there are cores (one after another, a leaf of 4 partitions took 4 times
  // one's time to start, and as long to take each new generation).
  partitions.resize(partition_dirs.size());
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t at_once = std::min(partition_dirs.size(), cores);
  OpenOptions each = options;  // the cores shared: each partition's term ranges on its share
  if (each.threads == 0) each.threads = std::max<size_t>(1, cores / std::max<size_t>(at_once, 1));
  run_parallel_tasks(partition_dirs.size(), at_once,
                     [&](size_t i) { partitions[i] = open_partition(partition_dirs[i], each); });
  if (partitions.empty()) throw Error("index " + path + ": the manifest lists none of the partitions asked for");
  if (!options.partitions.empty() && partitions.size() != options.partitions.size()) {
    throw Error("index " + path + ": some of the partitions asked for are not in the manifest");
  }
  std::sort(partitions.begin(), partitions.end(),
            [](const auto& a, const auto& b) { return a->view().meta.doc_begin < b->view().meta.doc_begin; });
  const PartitionMeta& first = partitions.front()->view().meta;
  DocId expected_begin = 0;
  for (const auto& partition : partitions) {
    const PartitionMeta& meta = partition->view().meta;
    if (meta.generation != manifest.value("generation", uint64_t{0}) || meta.generation != first.generation) {
      throw Error("index " + path + ": partition " + partition->path() + " belongs to generation " +
                  std::to_string(meta.generation) + ", not to the manifest's");
    }
    if (options.partitions.empty() && meta.doc_begin != expected_begin) {
      throw Error("index " + path + ": partitions do not cover the docID range contiguously at " +
                  std::to_string(expected_begin));
    }
    expected_begin = meta.doc_end;
  }
  if (options.partitions.empty() && expected_begin != first.stats.doc_count) {
    throw Error("index " + path + ": partitions are missing documents");
  }
  return partitions;
}

}  // namespace warp
