#include "common/transfer/generation_manifest.hpp"

#include <sodium.h>

#include <filesystem>
#include <fstream>

#include "common/protocol/publish.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/key_files.hpp"

namespace warp::transfer {
namespace fs = std::filesystem;

namespace {

// What is signed: a fixed context, then the manifest's bytes (a signature over anything else the
// indexer's key signs can never pass for a manifest's).
constexpr std::string_view kSignatureContext = "warpsearch generation manifest v1\n";
constexpr size_t kMaxManifestBytes = 64u << 20;
constexpr size_t kMaxPathBytes = 4096;

void init_sodium() {
  if (sodium_init() < 0) throw Error("libsodium could not be initialized");
}

std::string signed_message(std::string_view manifest) {
  std::string message(kSignatureContext);
  message.append(manifest);
  return message;
}

std::string to_hex(const std::string& bytes) {
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  hex.pop_back();
  return hex;
}

std::string read_hex_key(const std::string& path, size_t bytes, const char* what) {
  std::ifstream in(path);
  std::string hex;
  if (!(in >> hex))
    throw Error("cannot read the " + std::string(what) + " " + path + " (make one with warp-indexer signing-key)");
  std::string key(bytes, '\0');
  size_t length = 0;
  if (hex.size() != bytes * 2 ||
      sodium_hex2bin(reinterpret_cast<unsigned char*>(key.data()), key.size(), hex.data(), hex.size(), nullptr, &length,
                     nullptr) != 0 ||
      length != bytes) {
    throw Error(path + ": not a " + std::string(what) + " (" + std::to_string(bytes * 2) + " hex digits)");
  }
  return key;
}

// A path a leaf may create under its generation directory: relative, its parts neither empty nor
// "." nor "..", no NUL, no backslash.
bool safe_path(std::string_view path) {
  if (path.empty() || path.size() > kMaxPathBytes || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return path.find('\0') == std::string_view::npos && path.find('\\') == std::string_view::npos;
}

}  // namespace

const char* refusal_label(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kUnsigned:
      return "unsigned";
    case RefusalReason::kSignature:
      return "signature";
    case RefusalReason::kMalformed:
      return "malformed";
    case RefusalReason::kTooLarge:
      return "too_large";
    case RefusalReason::kGenerationStep:
      return "generation_step";
    case RefusalReason::kNoSpace:
      return "no_space";
    case RefusalReason::kDigest:
      return "digest";
  }
  return "unknown";
}

SigningKeyPair generate_signing_key_pair() {
  init_sodium();
  SigningKeyPair pair{std::string(crypto_sign_PUBLICKEYBYTES, '\0'), std::string(crypto_sign_SECRETKEYBYTES, '\0')};
  crypto_sign_keypair(reinterpret_cast<unsigned char*>(pair.public_key.data()),
                      reinterpret_cast<unsigned char*>(pair.secret_key.data()));
  return pair;
}

void write_signing_key_pair(const std::string& dir, const SigningKeyPair& pair) {
  fs::create_directories(dir);
  const fs::path public_file = fs::path(dir) / "generation-signing.pub";
  if (fs::exists(public_file))
    throw Error(public_file.string() + " exists: keys are never overwritten (remove it first, or use another --out)");
  write_new_file((fs::path(dir) / "generation-signing.key").string(), 0600, to_hex(pair.secret_key) + "\n");
  write_new_file(public_file.string(), 0644, to_hex(pair.public_key) + "\n");
}

std::string read_signing_key(const std::string& path) {
  init_sodium();
  return read_hex_key(path, crypto_sign_SECRETKEYBYTES, "generation signing key");
}

std::string read_verify_key(const std::string& path) {
  init_sodium();
  return read_hex_key(path, crypto_sign_PUBLICKEYBYTES, "generation signing public key");
}

SignedManifest sign_manifest(uint64_t generation, uint32_t partitions, const std::string& fetch_endpoint,
                             std::vector<GenerationFile> files, const std::string& secret_key) {
  capnp::MallocMessageBuilder builder;
  auto message = builder.initRoot<protocol::GenerationManifest>();
  message.setGeneration(generation);
  message.setPartitions(partitions);
  message.setFetchEndpoint(fetch_endpoint);
  auto list = message.initFiles(static_cast<unsigned>(files.size()));
  for (size_t i = 0; i < files.size(); ++i) {
    list[i].setPath(kj::StringPtr(files[i].path.c_str(), files[i].path.size()));
    list[i].setSize(files[i].size);
    list[i].setSha256(kj::arrayPtr(reinterpret_cast<const kj::byte*>(files[i].sha256.data()), files[i].sha256.size()));
  }
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  const auto encoded = words.asBytes();
  SignedManifest out;
  out.manifest = {generation, partitions, fetch_endpoint, std::move(files),
                  std::string(reinterpret_cast<const char*>(encoded.begin()), encoded.size())};
  if (!secret_key.empty()) out.signature = sign_manifest_bytes(out.manifest.bytes, secret_key);
  return out;
}

std::string sign_manifest_bytes(std::string_view bytes, const std::string& secret_key) {
  init_sodium();
  if (secret_key.size() != crypto_sign_SECRETKEYBYTES) throw Error("a generation signing key is 64 bytes");
  const std::string message = signed_message(bytes);
  std::string signature(crypto_sign_BYTES, '\0');
  crypto_sign_detached(reinterpret_cast<unsigned char*>(signature.data()), nullptr,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       reinterpret_cast<const unsigned char*>(secret_key.data()));
  return signature;
}

GenerationManifest open_manifest(std::string_view bytes, std::string_view signature, const ManifestLimits& limits) {
  using R = RefusalReason;
  if (bytes.empty()) throw GenerationRefused(R::kMalformed, "the announcement carries no manifest (an older indexer?)");
  if (bytes.size() > kMaxManifestBytes)
    throw GenerationRefused(R::kTooLarge, "a manifest of " + std::to_string(bytes.size()) + " bytes (at most " +
                                              std::to_string(kMaxManifestBytes) + ")");
  if (!limits.verify_key.empty()) {
    init_sodium();
    if (signature.empty()) throw GenerationRefused(R::kUnsigned, "the manifest is not signed");
    const std::string message = signed_message(bytes);
    if (signature.size() != crypto_sign_BYTES || limits.verify_key.size() != crypto_sign_PUBLICKEYBYTES ||
        crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(signature.data()),
                                    reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                    reinterpret_cast<const unsigned char*>(limits.verify_key.data())) != 0) {
      throw GenerationRefused(R::kSignature, "the manifest's signature does not verify with the indexer's public key");
    }
  }
  GenerationManifest manifest;
  try {
    FrameReader frame(bytes.data(), bytes.size());
    auto message = frame.root<protocol::GenerationManifest>();
    manifest.generation = message.getGeneration();
    manifest.partitions = message.getPartitions();
    manifest.fetch_endpoint = message.getFetchEndpoint();
    const auto files = message.getFiles();
    if (files.size() > limits.max_files)
      throw GenerationRefused(R::kTooLarge, std::to_string(files.size()) + " files announced (at most " +
                                                std::to_string(limits.max_files) + ")");
    uint64_t total = 0;
    for (auto file : files) {
      const auto path = file.getPath();  // all its bytes: a NUL inside is refused, not cut at
      GenerationFile entry{std::string(path.begin(), path.size()), file.getSize(), 0, {}};
      const auto digest = file.getSha256();
      entry.sha256.assign(reinterpret_cast<const char*>(digest.begin()), digest.size());
      if (!safe_path(entry.path)) throw GenerationRefused(R::kMalformed, "an unsafe file path '" + entry.path + "'");
      if (entry.sha256.size() != 32) throw GenerationRefused(R::kMalformed, entry.path + ": a digest not of 32 bytes");
      if (!manifest.files.empty() && !(manifest.files.back().path < entry.path))
        throw GenerationRefused(R::kMalformed, entry.path + ": files out of order or repeated");
      if (entry.size > limits.max_bytes - total)
        throw GenerationRefused(R::kTooLarge, "the files announced exceed " + std::to_string(limits.max_bytes) +
                                                  " bytes (at " + entry.path + ")");
      total += entry.size;
      manifest.files.push_back(std::move(entry));
    }
  } catch (const GenerationRefused&) {
    throw;
  } catch (const std::exception& e) {
    throw GenerationRefused(R::kMalformed, std::string("an unreadable manifest: ") + e.what());
  }
  if (manifest.generation == 0 || manifest.generation >= limits.max_generation)
    throw GenerationRefused(R::kGenerationStep, "generation " + std::to_string(manifest.generation) +
                                                    " is outside [1, " + std::to_string(limits.max_generation) + ")");
  manifest.bytes.assign(bytes);
  return manifest;
}

}  // namespace warp::transfer
