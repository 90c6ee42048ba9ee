#include "common/transfer/generation_files.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace fs = std::filesystem;

std::vector<GenerationFile> list_generation_files(const std::string& generation_dir) {
  std::vector<GenerationFile> files;
  for (const auto& entry : fs::recursive_directory_iterator(generation_dir)) {
    if (!entry.is_regular_file()) continue;
    files.push_back(
        {fs::relative(entry.path(), generation_dir).string(), entry.file_size(), crc32_of_file(entry.path().string())});
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

std::string generation_dir_name(uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%06llu", static_cast<unsigned long long>(generation));
  return name;
}

}  // namespace warp::transfer
