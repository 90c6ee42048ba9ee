#include "common/transfer/generation_files.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

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

std::string sha256_of(std::string_view bytes) {
  if (sodium_init() < 0) throw Error("libsodium could not be initialized");
  std::string digest(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256(reinterpret_cast<unsigned char*>(digest.data()),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return digest;
}

std::optional<uint64_t> parse_generation_dir_name(std::string_view name) {
  if (name.size() < 10 || name.size() > 24 || name.substr(0, 4) != "gen-" ||
      name.find_first_not_of("0123456789", 4) != std::string_view::npos)
    return std::nullopt;
  try {
    return std::stoull(std::string(name.substr(4)));
  } catch (const std::exception&) {  // past 2^64
    return std::nullopt;
  }
}

namespace {
constexpr const char* kWritesFile = "writes.json";
}

uint64_t read_write_sequence(const std::string& generation_dir) {
  std::ifstream in(fs::path(generation_dir) / kWritesFile);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t key = text.find("\"sequence\"");
  const size_t colon = key == std::string::npos ? key : text.find(':', key);
  if (colon == std::string::npos) return 0;
  try {
    return std::stoull(text.substr(colon + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

void write_write_sequence(const std::string& generation_dir, uint64_t sequence) {
  std::ofstream out(fs::path(generation_dir) / kWritesFile, std::ios::trunc);
  out << "{\"sequence\":" << sequence << "}";
  out.close();
  if (!out) throw Error("cannot write " + (fs::path(generation_dir) / kWritesFile).string());
}

std::string generation_dir_name(uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%06llu", static_cast<unsigned long long>(generation));
  return name;
}

}  // namespace warp::transfer
