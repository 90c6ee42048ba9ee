#include "common/transfer/generation_files.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {
namespace fs = std::filesystem;

namespace {

// One pass over a file for both of its checksums.
void checksum_file(const std::string& path, uint32_t* crc, std::string* sha256) {
  if (sodium_init() < 0) throw Error("libsodium could not be initialized");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::string buffer(1 << 20, '\0');
  uint32_t crc_value = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (crc) crc_value = crc32_of(buffer.data(), n, crc_value);
    crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(buffer.data()), n);
  }
  if (in.bad()) throw Error("cannot read " + path);
  if (crc) *crc = crc_value;
  sha256->assign(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256_final(&state, reinterpret_cast<unsigned char*>(sha256->data()));
}

}  // namespace

std::vector<GenerationFile> list_generation_files(const std::string& generation_dir) {
  std::vector<GenerationFile> files;
  for (const auto& entry : fs::recursive_directory_iterator(generation_dir)) {
    if (!entry.is_regular_file()) continue;
    GenerationFile file{fs::relative(entry.path(), generation_dir).string(), entry.file_size(), 0, {}};
    checksum_file(entry.path().string(), &file.crc32, &file.sha256);
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

std::string sha256_of_file(const std::string& path) {
  std::string digest;
  checksum_file(path, nullptr, &digest);
  return digest;
}

std::string generation_dir_name(uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%06llu", static_cast<unsigned long long>(generation));
  return name;
}

}  // namespace warp::transfer
