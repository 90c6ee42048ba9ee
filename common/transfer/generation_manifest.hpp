// A generation as the indexer vouches for it: every file's path, size and SHA-256, the fetch
// endpoint and the generation number, encoded once (Cap'n Proto, GenerationManifest in
// common/protocol/publish.capnp) and signed with the indexer's Ed25519 signing key. A leaf checks
// the signature against the indexer's public key, the manifest against its limits, and every
// fetched file against its digest before the generation is used, whether CurveZMQ is on or not:
// an impostor who can reach a leaf, or who recomputes a CRC, can neither serve other content nor
// announce a generation that fills the leaf's disk or freezes its updates.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/transfer/generation_files.hpp"
#include "common/util/status.hpp"

namespace warp::transfer {

// Why a generation was refused: the label of warpsearch_leaf_generations_refused_total.
enum class RefusalReason { kUnsigned, kSignature, kMalformed, kTooLarge, kGenerationStep, kNoSpace, kDigest };
const char* refusal_label(RefusalReason reason);
inline constexpr RefusalReason kAllRefusalReasons[] = {
    RefusalReason::kUnsigned,       RefusalReason::kSignature, RefusalReason::kMalformed, RefusalReason::kTooLarge,
    RefusalReason::kGenerationStep, RefusalReason::kNoSpace,   RefusalReason::kDigest};

// A generation that must not be used (as opposed to one that could not be fetched this time).
class GenerationRefused : public Error {
 public:
  GenerationRefused(RefusalReason reason, const std::string& what) : Error(what), reason_(reason) {}
  RefusalReason reason() const { return reason_; }

 private:
  RefusalReason reason_;
};

struct GenerationManifest {
  uint64_t generation = 0;
  uint32_t partitions = 0;
  std::string fetch_endpoint{};         // as announced (fetcher.hpp: reachable_fetch_endpoint)
  std::vector<GenerationFile> files{};  // sha256 set; in path order
  std::string bytes{};                  // the encoded manifest, as signed
};

// Ed25519 keys, hex in their files: DIR/generation-signing.key (the indexer's; mode 0600) and
// DIR/generation-signing.pub (every leaf's).
struct SigningKeyPair {
  std::string public_key;  // 32 bytes
  std::string secret_key;  // 64 bytes
};
SigningKeyPair generate_signing_key_pair();
// Throws Error, writing nothing, if either file exists.
void write_signing_key_pair(const std::string& dir, const SigningKeyPair& pair);
std::string read_signing_key(const std::string& path);  // the 64-byte secret key; throws Error naming the file
std::string read_verify_key(const std::string& path);   // the 32-byte public key

// The manifest of root/gen-N's files (listed with their digests), encoded and signed with
// `secret_key` (64 bytes; empty: unsigned, for leaves run with --unsigned-generations).
struct SignedManifest {
  GenerationManifest manifest;
  std::string signature;  // 64 bytes, or empty
};
SignedManifest sign_manifest(uint64_t generation, uint32_t partitions, const std::string& fetch_endpoint,
                             std::vector<GenerationFile> files, const std::string& secret_key);

// The signature of manifest bytes as encoded (sign_manifest's; 64 bytes).
std::string sign_manifest_bytes(std::string_view bytes, const std::string& secret_key);

struct ManifestLimits {
  std::string verify_key;           // 32 bytes; empty: unsigned manifests accepted (--unsigned-generations)
  uint64_t max_files = 100000;      // files in one generation
  uint64_t max_bytes = 1ull << 40;  // all its files together
  // A generation number at or past this is refused (2^64 − 1 would freeze every later update).
  uint64_t max_generation = 1ull << 48;
};

// The manifest in `bytes`, its `signature` checked and its limits held: at most max_files files,
// each path relative, without "..", ".", empty or NUL parts, in strict path order; each digest 32
// bytes; sizes summing to at most max_bytes; generation in [1, max_generation). Throws
// GenerationRefused with the reason.
GenerationManifest open_manifest(std::string_view bytes, std::string_view signature, const ManifestLimits& limits);

}  // namespace warp::transfer
