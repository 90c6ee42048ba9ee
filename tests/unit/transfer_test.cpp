// Publishing and fetching generations over ZeroMQ on loopback: announcement, chunked transfer with
// checksums, retries after corrupted chunks, and no partial generation left after a failed fetch.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/index/index_files.hpp"
#include "common/transfer/curve.hpp"
#include "common/transfer/fetcher.hpp"
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
    return {(dir_ / "published").string(), "tcp://127.0.0.1:*", "tcp://127.0.0.1:*", corrupt, std::move(curve)};
  }
  transfer::Announcement receive(const Publisher& publisher) {
    transfer::GenerationSubscriber subscriber(publisher.publish_endpoint());
    auto announcement = subscriber.next(std::chrono::seconds(5));  // re-announced every second
    EXPECT_TRUE(announcement.has_value()) << "no announcement from " << publisher.publish_endpoint();
    return announcement.value_or(transfer::Announcement{});
  }
  fs::path dir_;
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
  const transfer::Announcement announcement = receive(publisher);
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
  const transfer::Announcement announcement = receive(publisher);
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
  const transfer::Announcement announcement = receive(publisher);
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
  const transfer::Announcement announcement = receive(publisher);
  transfer::FetchStats stats;
  transfer::FetchOptions options;
  options.max_attempts = 3;
  EXPECT_THROW(transfer::fetch_generation(announcement, (dir_ / "leaf").string(), options, stats), Error);
  EXPECT_TRUE(fs::is_empty(dir_ / "leaf")) << "a partial generation was left behind";
  // A file the publisher never announced is refused with its reason.
  Publisher honest(publisher_options());
  honest.announce(1);
  transfer::Announcement bogus = receive(honest);
  bogus.files.push_back({"part-0000/../../secret", 10, 0});
  EXPECT_THROW(transfer::fetch_generation(bogus, (dir_ / "leaf2").string(), options, stats), Error);
  bogus.files.back().path = "part-0000/not-there";
  try {
    transfer::fetch_generation(bogus, (dir_ / "leaf2").string(), options, stats);
    FAIL() << "an unannounced file was served";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no file 'part-0000/not-there'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "leaf2" / "gen-000001"));
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
  const auto announcement = allowed.next(std::chrono::seconds(5));
  ASSERT_TRUE(announcement.has_value()) << "an allowed leaf got no announcement";
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
