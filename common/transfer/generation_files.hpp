// The files of one published generation: every regular file under the generation directory with
// its size, CRC-32 and SHA-256, in path order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

// The SHA-256 (32 bytes) of `bytes`.
std::string sha256_of(std::string_view bytes);

// "gen-000042": the directory name of a generation under an index root (6 digits at least).
std::string generation_dir_name(uint64_t generation);
// The generation a directory name names ("gen-" and 6 to 20 digits), or nothing.
std::optional<uint64_t> parse_generation_dir_name(std::string_view name);

// The writes through the API a generation holds, as the indexer records them in its directory
// (writes.json, {"sequence": N}); 0 for a generation without the file.
uint64_t read_write_sequence(const std::string& generation_dir);
void write_write_sequence(const std::string& generation_dir, uint64_t sequence);

}  // namespace warp::transfer
