// A leaf following an indexer refuses what its manifest check refuses, and goes on serving: a real
// LeafServer and GenerationFollower (RocksDB on disk, ZeroMQ on loopback, the metrics registry)
// against publishers taking turns on the indexer's endpoints. A generation signed by another key, a
// file changed after it was announced, more files than the leaf allows, a runaway and a huge
// generation number are each refused, logged and counted by reason, and nothing of them stays on
// disk; the honest generation after them is served, and older generations are pruned.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/fetcher.hpp"
#include "common/transfer/generation_manifest.hpp"
#include "indexer/publisher.hpp"
#include "leaf/service/generation_follower.hpp"
#include "leaf/service/leaf_server.hpp"
#include "tests/support/cranfield_index.hpp"

namespace warp {
namespace {
namespace fs = std::filesystem;

double refused(prometheus::Registry& registry, const std::string& reason) {
  for (const auto& family : registry.Collect()) {
    if (family.name != "warpsearch_leaf_generations_refused_total") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "reason" && label.value == reason) return metric.counter.value;
      }
    }
  }
  return -1;
}

// A LeafRequest frame as a broker sends it.
std::string leaf_request(const std::function<void(protocol::LeafRequest::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  fill(builder.initRoot<protocol::LeafRequest>());
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
}

// The generation that answered a search of partition 0 naming `generation` (and read-your-writes
// `after`).
uint64_t answered_by(LeafServer& server, uint64_t generation, uint64_t after = 0) {
  const std::string reply = server.handle(leaf_request([&](protocol::LeafRequest::Builder request) {
                                            auto search = request.initSearch();
                                            search.initTerms(1).set(0, "boundari");
                                            search.setK(10);
                                            search.setDeadlineMicros(5'000'000);
                                            search.setGeneration(generation);
                                            search.setAfter(after);
                                          }),
                                          std::chrono::steady_clock::now());
  transfer::FrameReader reader(reply.data(), reply.size());
  auto search = reader.root<protocol::LeafReply>().getSearch();
  EXPECT_EQ(std::string(search.getError().cStr()), "");
  EXPECT_GT(search.getHits().size(), 0u);
  return search.getGeneration();
}

bool wait_for(const std::function<bool()>& done, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class GenerationFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("warp-follower-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    published_ = dir_ / "published";
    fs::create_directories(published_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_generation(uint64_t generation) {
    const fs::path tmp = published_ / "building.tmp";
    testing::write_cranfield_index(tmp.string(), /*partitions=*/2, generation);
    fs::rename(tmp, published_ / transfer::generation_dir_name(generation));
  }
  // `slot`'s publisher replaced by one signing with `keys`, on the indexer's endpoints (any free
  // ports the first time, the same ones after).
  void publish_with(std::unique_ptr<Publisher>& slot, const transfer::SigningKeyPair& keys) {
    slot.reset();  // its ports free for the next
    slot = std::make_unique<Publisher>(PublisherOptions{.root = published_.string(),
                                                        .publish_endpoint = publish_endpoint_,
                                                        .fetch_endpoint = fetch_endpoint_,
                                                        .signing_key = keys.secret_key});
    publish_endpoint_ = slot->publish_endpoint();
    fetch_endpoint_ = slot->fetch_endpoint();
  }

  fs::path dir_, published_;
  std::string publish_endpoint_ = "tcp://127.0.0.1:*", fetch_endpoint_ = "tcp://127.0.0.1:*";
};

TEST_F(GenerationFollowerTest, RefusedGenerationsAreCountedAndTheLeafKeepsServing) {
  const transfer::SigningKeyPair indexer = transfer::generate_signing_key_pair();
  const transfer::SigningKeyPair impostor = transfer::generate_signing_key_pair();
  write_generation(1);
  std::unique_ptr<Publisher> source;
  publish_with(source, indexer);
  source->announce(1);

  auto registry = std::make_shared<prometheus::Registry>();
  LeafServer server(LeafOptions{.listen = "tcp://127.0.0.1:*"}, registry);
  const fs::path leaf_root = dir_ / "leaf";
  ::testing::internal::CaptureStderr();
  GenerationFollower follower(FollowOptions{.publish_endpoint = publish_endpoint_,
                                            .root = leaf_root.string(),
                                            .processor = "cpu",
                                            .manifest_limits = {.verify_key = indexer.public_key, .max_files = 60},
                                            .max_generation_step = 10,
                                            .swap_wait = std::chrono::milliseconds(50)},
                              server, *registry);
  const auto serving = [&] { return server.index() ? server.index()->generation : 0; };
  ASSERT_TRUE(wait_for([&] { return serving() == 1; })) << "generation 1 was not taken";
  for (const char* reason :
       {"unsigned", "signature", "malformed", "too_large", "generation_step", "no_space", "digest"})
    EXPECT_EQ(refused(*registry, reason), 0) << reason;

  // Signed by a key that is not the indexer's.
  write_generation(2);
  publish_with(source, impostor);
  source->announce(2);
  EXPECT_TRUE(wait_for([&] { return refused(*registry, "signature") >= 1; })) << "a forged manifest was not refused";

  // A file changed after its digest was announced.
  write_generation(3);
  publish_with(source, indexer);
  source->announce(3);
  for (const auto& entry : fs::recursive_directory_iterator(published_ / "gen-000003")) {
    if (entry.path().extension() == ".sst") {
      std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(0);
      file.put('\x55');
      break;
    }
  }
  EXPECT_TRUE(wait_for([&] { return refused(*registry, "digest") >= 1; })) << "a tampered file was not refused";

  // More files than the leaf allows.
  write_generation(4);
  for (int i = 0; i < 60; ++i) std::ofstream(published_ / "gen-000004" / ("filler-" + std::to_string(i))) << i;
  source->announce(4);
  EXPECT_TRUE(wait_for([&] { return refused(*registry, "too_large") >= 1; })) << "an oversized generation was taken";

  // Too far ahead of the one served, and a number that would freeze every later update.
  fs::copy(published_ / "gen-000001", published_ / "gen-000020", fs::copy_options::recursive);
  source->announce(20);
  EXPECT_TRUE(wait_for([&] { return refused(*registry, "generation_step") >= 1; }));
  fs::copy(published_ / "gen-000001", published_ / transfer::generation_dir_name(~0ull), fs::copy_options::recursive);
  source->announce(~0ull);
  EXPECT_TRUE(wait_for([&] { return refused(*registry, "generation_step") >= 2; }));
  EXPECT_EQ(serving(), 1u) << "a refused generation was served";
  EXPECT_TRUE(server.index()->partitions.size() == 2u);

  // The honest next generation is taken; the ones refused left nothing, older ones are pruned.
  fs::remove_all(published_ / transfer::generation_dir_name(~0ull));
  write_generation(5);
  publish_with(source, indexer);
  source->announce(5);
  ASSERT_TRUE(wait_for([&] { return serving() == 5; })) << "the honest generation 5 was not taken";
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const char* line :
       {"generation 5 served after 50 ms without a broker reading it", "generation 2 refused (signature)",
        "generation 3 refused (digest)", "generation 4 refused (too_large)", "generation 20 refused (generation_step)",
        "generation 18446744073709551615 refused (generation_step)"}) {
    EXPECT_NE(log.find(line), std::string::npos) << "not logged: " << line << "\n" << log;
  }
  // Re-announced every second, a refused generation is refused once.
  EXPECT_EQ(refused(*registry, "signature"), 1);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(leaf_root)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"gen-000001", "gen-000001.manifest", "gen-000005", "gen-000005.manifest"}));
}

// A new generation waits, loaded, until a request names it, so that the leaves of every partition
// swap as the broker moves on; the one before it answers requests naming it a while longer.
TEST_F(GenerationFollowerTest, ANewGenerationIsServedWhenABrokerReadsIt) {
  const transfer::SigningKeyPair indexer = transfer::generate_signing_key_pair();
  write_generation(1);
  std::unique_ptr<Publisher> source;
  publish_with(source, indexer);
  source->announce(1);
  auto registry = std::make_shared<prometheus::Registry>();
  LeafServer server(LeafOptions{.listen = "tcp://127.0.0.1:*"}, registry);
  GenerationFollower follower(FollowOptions{.publish_endpoint = publish_endpoint_,
                                            .root = (dir_ / "leaf").string(),
                                            .partitions = {0},
                                            .manifest_limits = {.verify_key = indexer.public_key},
                                            .swap_wait = std::chrono::hours(1)},
                              server, *registry);
  const auto serving = [&] { return server.index() ? server.index()->generation : 0; };
  ASSERT_TRUE(wait_for([&] { return serving() == 1; })) << "the first generation is served at once";
  EXPECT_EQ(server.staged_generation(), 0u);

  write_generation(2);
  source->announce(2);
  ASSERT_TRUE(wait_for([&] { return server.staged_generation() == 2; })) << "generation 2 was not staged";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(serving(), 1u) << "staged, not served, until a request names it";
  const auto status = [&](std::optional<uint64_t> at) {
    const std::string reply = server.handle(leaf_request([&](protocol::LeafRequest::Builder request) {
                                              if (at)
                                                request.setStatusAt(*at);
                                              else
                                                request.setStatus();
                                            }),
                                            std::chrono::steady_clock::now());
    transfer::FrameReader reader(reply.data(), reply.size());
    auto leaf = reader.root<protocol::LeafReply>().getStatus();
    return std::pair<uint64_t, uint64_t>(leaf.getGeneration(), leaf.getStagedGeneration());
  };
  EXPECT_EQ(status(std::nullopt), (std::pair<uint64_t, uint64_t>(1, 2)));
  EXPECT_EQ(answered_by(server, 0), 1u);
  EXPECT_EQ(answered_by(server, 1), 1u) << "a request naming the generation served does not swap";
  EXPECT_EQ(serving(), 1u);
  EXPECT_EQ(answered_by(server, 2), 2u) << "a request naming the staged generation swaps it in";
  EXPECT_EQ(serving(), 2u);
  EXPECT_EQ(server.staged_generation(), 0u);
  EXPECT_EQ(answered_by(server, 1), 1u) << "the generation before answers requests naming it for a while";
  EXPECT_EQ(answered_by(server, 1, /*after=*/1), 2u) << "but not a search needing writes it does not hold";
  EXPECT_EQ(answered_by(server, 0), 2u);
  EXPECT_EQ(status(std::nullopt), (std::pair<uint64_t, uint64_t>(2, 0)));

  // A broker's status request naming it swaps it in too.
  write_generation(3);
  source->announce(3);
  ASSERT_TRUE(wait_for([&] { return server.staged_generation() == 3; }));
  EXPECT_EQ(status(2), (std::pair<uint64_t, uint64_t>(2, 3))) << "naming an older one swaps nothing";
  EXPECT_EQ(status(3), (std::pair<uint64_t, uint64_t>(3, 0)));
  EXPECT_EQ(answered_by(server, 2), 2u);
  EXPECT_EQ(answered_by(server, 1), 3u) << "older than the generation before: the one served answers";
}

}  // namespace
}  // namespace warp
