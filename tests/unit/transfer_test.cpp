// Publishing and fetching generations over ZeroMQ on loopback: signed announcements, chunked
// transfer with checksums, retries after corrupted chunks, every file checked against its digest,
// no partial generation left after a failed fetch; the manifest's signature and limits.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "common/index/index_files.hpp"
#include "common/transfer/curve.hpp"
#include "common/transfer/fetcher.hpp"
#include "common/transfer/generation_manifest.hpp"
#include "common/util/status.hpp"
#include "indexer/reader/document_reader.hpp"
#include "indexer/publisher.hpp"
#include "leaf/query/index_searcher.hpp"
#include "tests/support/cranfield_index.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-transfer-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "published");
    testing::write_cranfield_index((dir_ / "published" / "gen-000001.tmp").string(), /*partitions=*/2,
                                   /*generation=*/1);
    fs::rename(dir_ / "published" / "gen-000001.tmp", dir_ / "published" / "gen-000001");
  }
  void TearDown() override { fs::remove_all(dir_); }

  PublisherOptions publisher_options(int corrupt = 0, transfer::CurveConfig curve = {}) const {
    return {(dir_ / "published").string(),
            "tcp://127.0.0.1:*",
            "tcp://127.0.0.1:*",
            corrupt,
            std::move(curve),
            keys_.secret_key};
  }
  transfer::ManifestLimits limits() const { return {.verify_key = keys_.public_key}; }
  // The next announcement's manifest, its signature checked.
  transfer::GenerationManifest receive(const Publisher& publisher) {
    transfer::GenerationSubscriber subscriber(publisher.publish_endpoint());
    auto announcement = subscriber.next(std::chrono::seconds(5));  // re-announced every second
    EXPECT_TRUE(announcement.has_value()) << "no announcement from " << publisher.publish_endpoint();
    if (!announcement) return {};
    return transfer::open_announcement(*announcement, limits());
  }
  fs::path dir_;
  const transfer::SigningKeyPair keys_ = transfer::generate_signing_key_pair();
};

// An indexer bound to every interface (tcp://0.0.0.0:5602, as in Kubernetes) announces an address no
// other pod can reach; the leaf fetches from the host it subscribed to instead.
TEST(ReachableFetchEndpoint, AWildcardHostBecomesTheHostSubscribedTo) {
  EXPECT_EQ(transfer::reachable_fetch_endpoint("tcp://0.0.0.0:5602", "tcp://indexer:5601"), "tcp://indexer:5602");
  EXPECT_EQ(transfer::reachable_fetch_endpoint("tcp://*:5602", "tcp://10.1.2.3:5601"), "tcp://10.1.2.3:5602");
  EXPECT_EQ(transfer::reachable_fetch_endpoint("tcp://[::]:5602", "tcp://indexer.ns.svc:5601"),
            "tcp://indexer.ns.svc:5602");
  // A named host is kept, and so is a wildcard when the subscription names none either.
  EXPECT_EQ(transfer::reachable_fetch_endpoint("tcp://files.example:7000", "tcp://indexer:5601"),
            "tcp://files.example:7000");
  EXPECT_EQ(transfer::reachable_fetch_endpoint("tcp://0.0.0.0:5602", "tcp://0.0.0.0:5601"), "tcp://0.0.0.0:5602");
  EXPECT_EQ(transfer::reachable_fetch_endpoint("ipc:///tmp/files", "tcp://indexer:5601"), "ipc:///tmp/files");
}

TEST_F(TransferTest, FetchedGenerationIsIdenticalAndSearchable) {
  Publisher publisher(publisher_options());
  publisher.announce(1);
  const transfer::GenerationManifest announcement = receive(publisher);
  EXPECT_EQ(announcement.generation, 1u);
  EXPECT_EQ(announcement.partitions, 2u);
  EXPECT_EQ(announcement.fetch_endpoint, publisher.fetch_endpoint());
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.chunk_bytes = 16 << 10;  // many chunks
  const std::string fetched = transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats);
  EXPECT_EQ(fetched, (dir_ / "leaf" / "gen-000001").string());
  EXPECT_EQ(stats.retries, 0u);
  EXPECT_GT(stats.chunks, announcement.files.size());
  const auto source_files = transfer::list_generation_files((dir_ / "published" / "gen-000001").string());
  const auto fetched_files = transfer::list_generation_files(fetched);
  ASSERT_EQ(source_files.size(), fetched_files.size());
  for (size_t i = 0; i < source_files.size(); ++i) {
    EXPECT_EQ(source_files[i].path, fetched_files[i].path);
    EXPECT_EQ(source_files[i].crc32, fetched_files[i].crc32) << source_files[i].path;
    EXPECT_EQ(source_files[i].sha256, fetched_files[i].sha256) << source_files[i].path;
    EXPECT_EQ(announcement.files[i].sha256, source_files[i].sha256) << source_files[i].path;
  }
  IndexSearcher source(open_index((dir_ / "published" / "gen-000001").string()));
  IndexSearcher copy(open_index(fetched));
  Analyzer analyzer;
  const Query query{analyzer.analyze("boundary layer transition"), QueryMode::kOr, 20};
  const auto a = source.search(query).hits, b = copy.search(query).hits;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].doc == b[i].doc && a[i].score == b[i].score);
  // Fetching again is a no-op: the generation is already in place.
  EXPECT_EQ(transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats), fetched);
}

TEST_F(TransferTest, ALeafFetchesAndOpensOnlyItsPartitions) {
  Publisher publisher(publisher_options());
  publisher.announce(1);
  const transfer::GenerationManifest announcement = receive(publisher);
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.partitions = {1};
  const std::string fetched = transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats);
  EXPECT_FALSE(fs::exists(fs::path(fetched) / "part-0000"));
  EXPECT_TRUE(fs::exists(fs::path(fetched) / "part-0001" / "CURRENT"));
  EXPECT_TRUE(fs::exists(fs::path(fetched) / "manifest.json"));
  OpenOptions open_options;
  open_options.partitions = {1};
  const auto partitions = open_index(fetched, open_options);
  ASSERT_EQ(partitions.size(), 1u);
  EXPECT_EQ(partitions[0]->view().meta.partition_id, 1u);
  EXPECT_THROW(open_index(fetched), Error);  // all partitions asked for: part-0000 is missing
  open_options.partitions = {7};
  EXPECT_THROW(open_index(fetched, open_options), Error);
}

TEST_F(TransferTest, CorruptedChunksAreDetectedAndRetried) {
  Publisher publisher(publisher_options(/*corrupt=*/3));
  publisher.announce(1);
  const transfer::GenerationManifest announcement = receive(publisher);
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.chunk_bytes = 8 << 10;
  const std::string fetched = transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats);
  EXPECT_EQ(stats.retries, 3u);
  EXPECT_NO_THROW(open_index(fetched));  // every checksum of the partitions holds too
}

TEST_F(TransferTest, AFailedFetchLeavesNothingBehind) {
  Publisher publisher(publisher_options(/*corrupt=*/1000000));
  publisher.announce(1);
  const transfer::GenerationManifest announcement = receive(publisher);
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.max_attempts = 3;
  EXPECT_THROW(transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats), Error);
  EXPECT_TRUE(fs::is_empty(dir_ / "leaf")) << "a partial generation was left behind";
  // A file the publisher never announced (in a manifest signed with the right key) is refused by
  // the publisher, with its reason.
  Publisher honest(publisher_options());
  honest.announce(1);
  transfer::GenerationManifest genuine = receive(honest);
  auto files = genuine.files;
  files.push_back({"part-0000/not-there", 10, 0, std::string(32, '\0')});
  const transfer::GenerationManifest bogus =
      transfer::sign_manifest(1, 2, genuine.fetch_endpoint, files, keys_.secret_key).manifest;
  try {
    transfer::fetch_generation(bogus, (dir_ / "leaf2").string(), options, stats);
    FAIL() << "an unannounced file was served";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no file 'part-0000/not-there'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "leaf2" / "gen-000001"));
}

// A file changed after it was announced (on the indexer's disk, or by whoever serves the files)
// passes every chunk's CRC, which the server computes as it sends, but not the manifest's SHA-256:
// the generation is refused and nothing of it is kept.
TEST_F(TransferTest, AFileNotMatchingItsDigestIsRefused) {
  Publisher publisher(publisher_options());
  publisher.announce(1);
  const transfer::GenerationManifest announcement = receive(publisher);
  const fs::path victim = dir_ / "published" / "gen-000001" / announcement.files.back().path;
  {
    std::fstream file(victim, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(0);
    file.put('\x7f');
  }
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.max_attempts = 2;
  try {
    transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats);
    FAIL() << "a tampered file was taken";
  } catch (const transfer::GenerationRefused& e) {
    EXPECT_EQ(e.reason(), transfer::RefusalReason::kDigest) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "leaf")) << "a refused generation was left behind";
}

// A generation larger than the leaf's disk is refused before a byte is fetched.
TEST_F(TransferTest, AGenerationLargerThanTheDiskIsRefusedBeforeFetching) {
  Publisher publisher(publisher_options());
  publisher.announce(1);
  transfer::GenerationManifest genuine = receive(publisher);
  auto files = genuine.files;
  files.push_back({"part-0001/huge.sst", 1ull << 56, 0, std::string(32, '\1')});
  const auto huge = transfer::sign_manifest(1, 2, genuine.fetch_endpoint, files, keys_.secret_key);
  transfer::ManifestLimits generous = limits();
  generous.max_bytes = ~0ull;
  const transfer::GenerationManifest opened = transfer::open_manifest(huge.manifest.bytes, huge.signature, generous);
  transfer::FetchStats stats;
  try {
    transfer::fetch_generation(opened, (dir_ / "leaf").string(), {}, stats);
    FAIL() << "a generation of 2^56 bytes was fetched";
  } catch (const transfer::GenerationRefused& e) {
    EXPECT_EQ(e.reason(), transfer::RefusalReason::kNoSpace) << e.what();
  }
  EXPECT_EQ(stats.chunks, 0u);
  // Under the default limit (1 TiB) it is refused on opening already.
  try {
    transfer::open_manifest(huge.manifest.bytes, huge.signature, limits());
    FAIL() << "2^56 bytes passed the size limit";
  } catch (const transfer::GenerationRefused& e) {
    EXPECT_EQ(e.reason(), transfer::RefusalReason::kTooLarge) << e.what();
  }
}

// A generation fetched for one manifest is not reused for another manifest of the same number (an
// index rebuilt from nothing numbers its generations from 1 again); pruning keeps what it is told.
TEST_F(TransferTest, AnotherManifestOfTheSameNumberIsFetchedAgainAndOldGenerationsArePruned) {
  Publisher publisher(publisher_options());
  publisher.announce(1);
  const transfer::GenerationManifest first = receive(publisher);
  const std::string root = (dir_ / "leaf").string();
  transfer::FetchStats stats;
  transfer::fetch_generation(first, root, {}, stats);
  const uint64_t bytes_once = stats.bytes;
  transfer::fetch_generation(first, root, {}, stats);
  EXPECT_EQ(stats.bytes, bytes_once) << "the same manifest fetched twice";
  // The same files under another manifest (here: another partition count) of generation 1.
  const auto other = transfer::sign_manifest(1, 3, first.fetch_endpoint, first.files, keys_.secret_key);
  const transfer::GenerationManifest second = transfer::open_manifest(other.manifest.bytes, other.signature, limits());
  transfer::fetch_generation(second, root, {}, stats);
  EXPECT_EQ(stats.bytes, 2 * bytes_once) << "a directory fetched for another manifest was reused";
  for (uint64_t generation : {2, 3, 7})
    fs::create_directories(fs::path(root) / transfer::generation_dir_name(generation));
  std::ofstream(fs::path(root) / "gen-000003.manifest") << "x";
  std::ofstream(fs::path(root) / "notes.txt") << "not a generation";
  transfer::prune_generations(root, {7, 1});
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(root)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"gen-000001", "gen-000001.manifest", "gen-000007", "notes.txt"}));
}

// Generation directory names: six digits at least, more past 999,999 (a name of 11 characters had
// been skipped by the indexer's latest-generation scan and both prunings).
TEST(GenerationDirName, RoundTripsPastSixDigits) {
  for (uint64_t generation : {1ull, 999999ull, 1000000ull, ~0ull})
    EXPECT_EQ(transfer::parse_generation_dir_name(transfer::generation_dir_name(generation)), generation);
  for (const char* name : {"gen-00001", "gen-00000a", "gen-000001.tmp", "gen-000001.manifest",
                           "gen-99999999999999999999", "part-000001", ""})
    EXPECT_FALSE(transfer::parse_generation_dir_name(name).has_value()) << name;
}

// What a leaf accepts of a manifest: the indexer's signature over exactly its bytes, and limits
// that keep a signed but wrong one (or an unsigned one, with --unsigned-generations) from filling
// the disk, escaping the generation directory or freezing the generation number.
TEST(GenerationManifest, SignatureAndLimitsAreChecked) {
  using transfer::RefusalReason;
  const transfer::SigningKeyPair indexer = transfer::generate_signing_key_pair();
  const transfer::SigningKeyPair impostor = transfer::generate_signing_key_pair();
  const std::vector<transfer::GenerationFile> files = {{"manifest.json", 10, 0, std::string(32, 'a')},
                                                       {"part-0000/000001.sst", 1000, 0, std::string(32, 'b')}};
  const transfer::ManifestLimits checked{.verify_key = indexer.public_key};
  const transfer::ManifestLimits unsigned_ok{};
  const auto refusal = [](const transfer::SignedManifest& m, const transfer::ManifestLimits& limits) {
    try {
      transfer::open_manifest(m.manifest.bytes, m.signature, limits);
    } catch (const transfer::GenerationRefused& e) {
      return std::string(transfer::refusal_label(e.reason()));
    }
    return std::string("accepted");
  };
  const auto genuine = transfer::sign_manifest(5, 1, "tcp://indexer:5602", files, indexer.secret_key);
  const auto opened = transfer::open_manifest(genuine.manifest.bytes, genuine.signature, checked);
  EXPECT_EQ(opened.generation, 5u);
  EXPECT_EQ(opened.partitions, 1u);
  EXPECT_EQ(opened.fetch_endpoint, "tcp://indexer:5602");
  ASSERT_EQ(opened.files.size(), 2u);
  EXPECT_EQ(opened.files[1].path, "part-0000/000001.sst");
  EXPECT_EQ(opened.files[1].size, 1000u);
  EXPECT_EQ(opened.files[1].sha256, std::string(32, 'b'));

  EXPECT_EQ(refusal(transfer::sign_manifest(5, 1, "tcp://x:1", files, impostor.secret_key), checked), "signature");
  EXPECT_EQ(refusal(transfer::sign_manifest(5, 1, "tcp://x:1", files, ""), checked), "unsigned");
  EXPECT_EQ(refusal(transfer::sign_manifest(5, 1, "tcp://x:1", files, ""), unsigned_ok), "accepted");
  for (size_t at : {size_t{0}, genuine.manifest.bytes.size() / 2, genuine.manifest.bytes.size() - 1}) {
    transfer::SignedManifest altered = genuine;  // one bit of the signed bytes
    altered.manifest.bytes[at] ^= 0x01;
    EXPECT_EQ(refusal(altered, checked), "signature") << "byte " << at;
  }
  transfer::SignedManifest cut = genuine;
  cut.signature.pop_back();
  EXPECT_EQ(refusal(cut, checked), "signature");

  const auto with = [&](std::vector<transfer::GenerationFile> f, uint64_t generation = 5) {
    return transfer::sign_manifest(generation, 1, "tcp://x:1", std::move(f), indexer.secret_key);
  };
  for (const char* path : {"../escape", "/etc/passwd", "part-0000/../../x", "a//b", "./a", "a/.", "", "a\\b"}) {
    EXPECT_EQ(refusal(with({{path, 1, 0, std::string(32, 'c')}}), checked), "malformed") << path;
  }
  EXPECT_EQ(refusal(with({{std::string("a\0b", 3), 1, 0, std::string(32, 'c')}}), checked), "malformed");
  EXPECT_EQ(refusal(with({files[1], files[0]}), checked), "malformed") << "out of order";
  EXPECT_EQ(refusal(with({files[0], files[0]}), checked), "malformed") << "repeated";
  EXPECT_EQ(refusal(with({{"a", 1, 0, std::string(31, 'c')}}), checked), "malformed") << "short digest";
  EXPECT_EQ(refusal(with({{"a", ~0ull, 0, std::string(32, 'c')}, {"b", 2, 0, std::string(32, 'c')}}), checked),
            "too_large")
      << "sizes that overflow";
  transfer::ManifestLimits few = checked;
  few.max_files = 1;
  EXPECT_EQ(refusal(genuine, few), "too_large");
  EXPECT_EQ(refusal(with(files, 0), checked), "generation_step");
  EXPECT_EQ(refusal(with(files, ~0ull), checked), "generation_step");
  EXPECT_EQ(refusal(with(files, 1ull << 48), checked), "generation_step");
  EXPECT_EQ(refusal(with(files, (1ull << 48) - 1), checked), "accepted");
  EXPECT_EQ(refusal({{.bytes = "not a manifest at all!!"}, {}}, unsigned_ok), "malformed");
  EXPECT_EQ(refusal({{.bytes = ""}, {}}, unsigned_ok), "malformed");

  // The announcement must name the manifest's generation.
  const transfer::Announcement mismatched{.generation = 6,
                                          .manifest = genuine.manifest.bytes,
                                          .signature = genuine.signature,
                                          .publish_endpoint = "tcp://indexer:5601"};
  EXPECT_THROW(transfer::open_announcement(mismatched, checked), transfer::GenerationRefused);
}

// The signing pair's files: the secret one 0600 from its creation, neither overwritten, both read
// back; a file that is not a key is named in the error.
TEST_F(TransferTest, SigningKeyFilesAreCreatedPrivateAndReadBack) {
  const std::string keys = (dir_ / "signing").string();
  const mode_t old_mask = ::umask(0);
  const transfer::SigningKeyPair pair = transfer::generate_signing_key_pair();
  transfer::write_signing_key_pair(keys, pair);
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat((fs::path(keys) / "generation-signing.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(transfer::read_signing_key(keys + "/generation-signing.key"), pair.secret_key);
  EXPECT_EQ(transfer::read_verify_key(keys + "/generation-signing.pub"), pair.public_key);
  EXPECT_THROW(transfer::write_signing_key_pair(keys, transfer::generate_signing_key_pair()), Error);
  EXPECT_EQ(transfer::read_signing_key(keys + "/generation-signing.key"), pair.secret_key);
  EXPECT_THROW(transfer::read_verify_key(keys + "/generation-signing.key"), Error) << "a secret key is no public key";
  EXPECT_THROW(transfer::read_verify_key(keys + "/absent.pub"), Error);
}

// A secret key file is created with mode 0600 (never wider, whatever the umask, not even for a
// moment) and never overwritten.
TEST_F(TransferTest, KeyFilesAreCreatedPrivateAndNeverOverwritten) {
  const std::string keys = (dir_ / "private-keys").string();
  const mode_t old_mask = ::umask(0);
  transfer::write_curve_key_pair(keys, "broker", transfer::generate_curve_key_pair());
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat((fs::path(keys) / "broker.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string first = transfer::load_curve_config(keys, "broker").own.secret_key;
  EXPECT_THROW(transfer::write_curve_key_pair(keys, "broker", transfer::generate_curve_key_pair()), Error);
  EXPECT_EQ(transfer::load_curve_config(keys, "broker").own.secret_key, first);
}

// CurveZMQ on both of the indexer's sockets: a leaf with an allowed key gets the announcement and the
// files; a subscriber without keys or with a key off the allow-list hears nothing, and a fetch with
// such a key fails (the ZAP handler counts the refusals).
TEST_F(TransferTest, CurveLetsOnlyAllowedLeavesSubscribeAndFetch) {
  const std::string keys = (dir_ / "keys").string(), stranger = (dir_ / "stranger").string();
  for (const char* role : {"indexer", "leaf"}) {
    transfer::write_curve_key_pair(keys, role, transfer::generate_curve_key_pair());
  }
  transfer::write_curve_key_pair(stranger, "leaf", transfer::generate_curve_key_pair());
  fs::copy_file(fs::path(keys) / "indexer.pub", fs::path(stranger) / "indexer.pub");
  const transfer::CurveConfig leaf = transfer::load_curve_config(keys, "leaf");
  const transfer::CurveConfig intruder = transfer::load_curve_config(stranger, "leaf");
  Publisher publisher(publisher_options(0, transfer::load_curve_config(keys, "indexer", "leaf")));
  publisher.announce(1);

  transfer::GenerationSubscriber plain(publisher.publish_endpoint());
  transfer::GenerationSubscriber refused(publisher.publish_endpoint(), intruder);
  transfer::GenerationSubscriber allowed(publisher.publish_endpoint(), leaf);
  const auto heard = allowed.next(std::chrono::seconds(5));
  ASSERT_TRUE(heard.has_value()) << "an allowed leaf got no announcement";
  const auto announcement = std::optional(transfer::open_announcement(*heard, limits()));
  EXPECT_FALSE(plain.next(std::chrono::milliseconds(1500)).has_value()) << "a subscriber without keys was served";
  EXPECT_FALSE(refused.next(std::chrono::milliseconds(100)).has_value()) << "a key off the allow-list was served";

  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.curve = leaf;
  const std::string fetched = transfer::fetch_generation(*announcement, (dir_ / "leaf").string(), options, stats);
  EXPECT_NO_THROW(open_index(fetched));
  options.curve = intruder;
  options.max_attempts = 2;
  options.reply_timeout = std::chrono::milliseconds(300);
  EXPECT_THROW(transfer::fetch_generation(*announcement, (dir_ / "intruder").string(), options, stats), Error);
  EXPECT_THROW(transfer::load_curve_config(keys, "broker"), Error) << "a missing key pair must be named";
}

}  // namespace
}  // namespace warp
