// The files of one published generation: every regular file under the generation directory with
// its size, CRC-32 and SHA-256, in path order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace warp::transfer {

struct GenerationFile {
  std::string path;  // relative to the generation directory
  uint64_t size = 0;
  uint32_t crc32 = 0;
  std::string sha256;  // 32 bytes
};

std::vector<GenerationFile> list_generation_files(const std::string& generation_dir);

// The SHA-256 (32 bytes) of a whole file, read in 1 MiB pieces; throws Error if it cannot be read.
std::string sha256_of_file(const std::string& path);

// "gen-000042": the directory name of a generation under an index root.
std::string generation_dir_name(uint64_t generation);

}  // namespace warp::transfer
