// libFuzzer: generation manifests as a leaf opens them (common/transfer/generation_manifest.hpp).
// The first input byte chooses how the rest is read:
//   0: raw bytes with no signature: refused where a key is required; where unsigned manifests are
//      taken, refused or accepted within the limits;
//   1: raw bytes signed with the indexer's key (a key holder gone wrong): refused or accepted within
//      the limits, never anything else;
//   2: a manifest built from the input's lines (paths) and bytes (sizes, generation), signed, then
//      one byte of the manifest or of the signature flipped where the input says: refused as
//      `signature` whenever a byte was flipped; the unflipped one opens as it was built, or is
//      refused for its own content.
// Accepted means: paths relative and free of "..", ".", empty parts, NUL and backslash, in strict
// order; every digest 32 bytes; at most max_files files and max_bytes bytes; generation in
// [1, max_generation).
#include <cstdlib>
#include <string>
#include <vector>

#include "common/transfer/fetcher.hpp"
#include "common/transfer/generation_manifest.hpp"

namespace {

using warp::transfer::GenerationManifest;
using warp::transfer::GenerationRefused;
using warp::transfer::ManifestLimits;

const warp::transfer::SigningKeyPair& keys() {
  static const auto* pair = new warp::transfer::SigningKeyPair(warp::transfer::generate_signing_key_pair());
  return *pair;
}

ManifestLimits limits(bool signed_only) {
  ManifestLimits limits;
  if (signed_only) limits.verify_key = keys().public_key;
  limits.max_files = 64;
  limits.max_bytes = 1ull << 40;
  return limits;
}

bool safe(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find('\0') != std::string::npos || path.find('\\') != std::string::npos)
    return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    const std::string part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

void check_accepted(const GenerationManifest& manifest, const ManifestLimits& limits) {
  if (manifest.generation == 0 || manifest.generation >= limits.max_generation) std::abort();
  if (manifest.files.size() > limits.max_files) std::abort();
  unsigned long long total = 0;
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const auto& file = manifest.files[i];
    if (!safe(file.path) || file.sha256.size() != 32) std::abort();
    if (i > 0 && !(manifest.files[i - 1].path < file.path)) std::abort();
    if (file.size > limits.max_bytes - total) std::abort();
    total += file.size;
  }
}

// Opens; true when accepted (and then within the limits).
bool open(const std::string& bytes, const std::string& signature, const ManifestLimits& limits,
          GenerationManifest* out = nullptr) {
  try {
    GenerationManifest manifest = warp::transfer::open_manifest(bytes, signature, limits);
    check_accepted(manifest, limits);
    if (out) *out = std::move(manifest);
    return true;
  } catch (const GenerationRefused&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      if (open(input, "", limits(true))) std::abort();  // unsigned, a key required
      open(input, "", limits(false));
      return 0;
    case 1:  // the input's own bytes, as a holder of the key signed them
      open(input, warp::transfer::sign_manifest_bytes(input, keys().secret_key), limits(true));
      return 0;
    default: {
      if (input.size() < 12) return 0;
      uint64_t generation = 0;
      for (int i = 0; i < 8; ++i) generation = generation << 8 | static_cast<uint8_t>(input[i]);
      const size_t flip_at = static_cast<uint8_t>(input[8]) | static_cast<uint8_t>(input[9]) << 8;
      const uint8_t flip = static_cast<uint8_t>(input[10]);
      std::vector<warp::transfer::GenerationFile> files;
      size_t start = 11;
      while (start < input.size() && files.size() < 80) {
        size_t end = input.find('\n', start);
        if (end == std::string::npos) end = input.size();
        const std::string path = input.substr(start, end - start);
        files.push_back({path, path.size() * 1000003ull, 0, std::string(path.size() % 7 ? 32 : 31, 'd')});
        start = end + 1;
      }
      const auto built = warp::transfer::sign_manifest(generation, 1, "tcp://indexer:5602", files, keys().secret_key);
      std::string bytes = built.manifest.bytes, signature = built.signature;
      const size_t at = flip_at % (bytes.size() + signature.size());
      if (flip != 0) (at < bytes.size() ? bytes[at] : signature[at - bytes.size()]) ^= static_cast<char>(flip);
      GenerationManifest opened;
      const bool accepted = open(bytes, signature, limits(true), &opened);
      if (flip != 0 && accepted) std::abort();  // altered, yet taken
      if (flip == 0 && accepted) {
        if (opened.generation != generation || opened.files.size() != files.size()) std::abort();
        for (size_t i = 0; i < files.size(); ++i) {
          if (opened.files[i].path != files[i].path || opened.files[i].size != files[i].size) std::abort();
        }
        // The announcement must name the same generation.
        const warp::transfer::Announcement announcement{generation + 1, bytes, signature, "tcp://indexer:5601"};
        try {
          warp::transfer::open_announcement(announcement, limits(true));
          std::abort();
        } catch (const GenerationRefused&) {
        }
      }
      return 0;
    }
  }
}
