# Indexer → leaf messages: generation announcements (ZeroMQ PUB/SUB) and partition file transfer
# in checksummed chunks (ZeroMQ DEALER → ROUTER). Fields are only ever added, with new numbers, so
# an older peer reads a newer message (unknown fields are ignored) and a newer peer reads an older
# one (absent fields read as defaults).
@0xd2c5b0e4f1a39c71;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("warp::protocol");

struct FileEntry {
  path @0 :Text;      # relative to the generation directory, e.g. "part-0001/000012.sst"
  size @1 :UInt64;
  crc32 @2 :UInt32;   # of the whole file
}

struct GenerationAnnouncement {
  protocolVersion @0 :UInt32 = 1;
  generation @1 :UInt64;
  partitions @2 :UInt32;
  files @3 :List(FileEntry);
  fetchEndpoint @4 :Text;   # where the ROUTER serves the files
  # The generation as the indexer vouches for it (common/transfer/generation_manifest.hpp): a
  # GenerationManifest's bytes, and their Ed25519 signature by the indexer's signing key. A leaf
  # reads the generation from these alone; the fields above are kept for older leaves.
  manifest @5 :Data;
  signature @6 :Data;
}

struct ManifestFile {
  path @0 :Text;
  size @1 :UInt64;
  sha256 @2 :Data;    # 32 bytes, of the whole file
}

struct GenerationManifest {
  generation @0 :UInt64;
  partitions @1 :UInt32;
  fetchEndpoint @2 :Text;
  files @3 :List(ManifestFile);   # in path order, each path once
}

struct FetchRequest {
  generation @0 :UInt64;
  path @1 :Text;
  offset @2 :UInt64;
  length @3 :UInt32;
}

struct FetchResponse {
  generation @0 :UInt64;
  path @1 :Text;
  offset @2 :UInt64;
  data @3 :Data;
  crc32 @4 :UInt32;   # of data
  error @5 :Text;     # empty on success
}
