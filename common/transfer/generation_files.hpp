// The files of one published generation: every regular file under the generation directory with
// its size and CRC-32, in path order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace warp::transfer {

struct GenerationFile {
  std::string path;  // relative to the generation directory
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

std::vector<GenerationFile> list_generation_files(const std::string& generation_dir);

// "gen-000042": the directory name of a generation under an index root.
std::string generation_dir_name(uint64_t generation);

}  // namespace warp::transfer
