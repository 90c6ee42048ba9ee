// The broker's fan-out against scripted leaves on loopback: real ZeroMQ sockets and, for the direct
// search path, a real TCP connection. Each fake leaf answers the cluster's status polls as ready and
// every search as it is told to: with hits, with an error, not at all, or by dropping its direct
// connection (a leaf that dies mid-query). Checks failover to another replica, attempt timeouts,
// partial answers at the deadline and the merge over partitions.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <zmq.hpp>

#include "broker/cluster.hpp"
#include "broker/fan_out.hpp"
#include "common/http/io_pool.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/secure_channel.hpp"
#include "gtest/gtest.h"

namespace warp {
namespace {

using namespace std::chrono_literals;

enum class Behaviour { kAnswer, kError, kSilent, kDropDirect };

class FakeLeaf {
 public:
  // `hits`: docIDs answered (scores descending from `top`); `direct`: offer a direct search port.
  // `delay`: before each search's answer (its replica's recent latency then ranks it last).
  FakeLeaf(Behaviour behaviour, uint32_t partition, std::vector<DocId> hits, float top, bool direct = false,
           std::chrono::milliseconds delay = 0ms)
      : behaviour_(behaviour),
        partition_(partition),
        hits_(std::move(hits)),
        top_(top),
        delay_(delay),
        router_(context_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    if (direct) open_direct();
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeLeaf() {
    stop_ = true;
    thread_.join();
    if (listener_ >= 0) ::close(listener_);
  }
  const std::string& endpoint() const { return endpoint_; }
  int searches() const { return searches_; }

 private:
  void open_direct() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::listen(listener_, 8), 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    search_port_ = ntohs(address.sin_port);
  }

  std::string status_reply() const {
    capnp::MallocMessageBuilder builder;
    auto status = builder.initRoot<protocol::LeafReply>().initStatus();
    status.initPartitions(1).set(0, partition_);
    status.setGeneration(1);
    status.setAnalyzer("test");
    status.setReady(true);
    status.setSearchPort(search_port_);
    return flat(builder);
  }

  std::string search_reply(protocol::SearchRequest::Reader request) const {
    capnp::MallocMessageBuilder builder;
    auto response = builder.initRoot<protocol::LeafReply>().initSearch();
    response.setQueryId(request.getQueryId());
    response.setPartition(request.getPartition());
    if (behaviour_ == Behaviour::kError) {
      response.setError("no such partition");
    } else {
      auto hits = response.initHits(static_cast<unsigned>(hits_.size()));
      for (unsigned i = 0; i < hits_.size(); ++i) {
        hits[i].setDoc(hits_[i]);
        hits[i].setScore(top_ - static_cast<float>(i));
        hits[i].setExternalId("doc-" + std::to_string(hits_[i]));
      }
    }
    return flat(builder);
  }

  static std::string flat(capnp::MessageBuilder& builder) {
    const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
    return std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
  }

  // The ZeroMQ side: [identity][empty][request] in, [identity][empty][reply] out.
  void serve_router() {
    zmq::message_t identity, empty, body;
    while (router_.recv(identity, zmq::recv_flags::dontwait)) {
      if (!router_.recv(empty) || !router_.recv(body)) continue;
      transfer::FrameReader reader(body.data(), body.size());
      const auto request = reader.root<protocol::LeafRequest>();
      std::string reply;
      if (request.isStatus()) {
        reply = status_reply();
      } else {
        ++searches_;
        if (behaviour_ == Behaviour::kSilent) continue;
        std::this_thread::sleep_for(delay_);
        reply = search_reply(request.getSearch());
      }
      router_.send(std::move(identity), zmq::send_flags::sndmore);
      router_.send(zmq::message_t(), zmq::send_flags::sndmore);
      router_.send(zmq::message_t(reply.data(), reply.size()), zmq::send_flags::none);
    }
  }

  // The direct side (Curve off: plain frames): a search that arrives closes the connection.
  void serve_direct() {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK);
    if (fd >= 0) connections_.push_back({fd, {}});
    for (auto it = connections_.begin(); it != connections_.end();) {
      char buffer[4096];
      const ssize_t n = ::read(it->first, buffer, sizeof buffer);
      if (n > 0) it->second.append(buffer, static_cast<size_t>(n));
      size_t at = 0;
      bool drop = n == 0;
      while (auto frame = transfer::next_stream_frame(it->second, at)) {
        ++searches_;
        drop = true;  // Behaviour::kDropDirect: the leaf dies mid-query
      }
      if (drop) {
        ::close(it->first);
        it = connections_.erase(it);
      } else {
        it->second.erase(0, at);
        ++it;
      }
    }
  }

  void serve() {
    while (!stop_) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 5ms);
      serve_router();
      if (listener_ >= 0) serve_direct();
    }
    for (auto& connection : connections_) ::close(connection.first);
  }

  Behaviour behaviour_;
  uint32_t partition_;
  std::vector<DocId> hits_;
  float top_;
  std::chrono::milliseconds delay_;
  zmq::context_t context_{1};
  zmq::socket_t router_;
  std::string endpoint_;
  int listener_ = -1;
  uint16_t search_port_ = 0;
  std::vector<std::pair<int, std::string>> connections_;
  std::atomic<int> searches_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A cluster over `specs`, waited on until every partition has a ready replica, and a fan-out on
// one loop.
class FanOutTest : public ::testing::Test {
 protected:
  // `ports`: how many replicas offer a direct search port (their status names it).
  void start(const std::vector<std::string>& specs, bool direct = false, size_t ports = 0) {
    cluster_ = std::make_unique<Cluster>(specs);
    // Made first, as the broker does: its sockets connect while the status poll finds the leaves.
    fan_out_ = std::make_unique<FanOut>(*cluster_, pool_, 1, direct);
    // Every replica healthy (cluster ready needs one a partition: a failover needs them all), and
    // the direct search ports known.
    const auto every_replica = [&] {
      const nlohmann::json described = cluster_->describe();
      size_t known_ports = 0;
      for (const auto& partition : described["partitions"]) {
        for (const auto& replica : partition["replicas"]) {
          if (!replica["healthy"].get<bool>()) return false;
          known_ports += replica.contains("search_port");
        }
      }
      return known_ports >= ports;
    };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!every_replica() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(every_replica()) << "the fake leaves never all answered the status poll: "
                                 << cluster_->describe().dump();
    std::this_thread::sleep_for(100ms);  // the fan-out's own connections up
  }
  void TearDown() override {
    pool_.stop();
    fan_out_.reset();
  }
  FanOutResult search(std::chrono::milliseconds timeout, double* took_ms = nullptr) {
    std::promise<FanOutResult> done;
    FanOutRequest request;
    request.terms = {{"word", 1}};
    request.k = 10;
    request.timeout = timeout;
    const auto start = std::chrono::steady_clock::now();
    fan_out_->submit(std::move(request), [&](FanOutResult result) { done.set_value(std::move(result)); });
    FanOutResult result = done.get_future().get();
    if (took_ms) *took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  http::IoPool pool_{1};
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<FanOut> fan_out_;
};

TEST_F(FanOutTest, AnErrorFromOneReplicaGoesToTheNextAtOnce) {
  FakeLeaf failing(Behaviour::kError, 0, {}, 0), good(Behaviour::kAnswer, 0, {3, 1}, 9);
  // Equal load and latency: the first listed is chosen first.
  start({"0=" + failing.endpoint() + "," + good.endpoint()});
  double took = 0;
  const FanOutResult result = search(3000ms, &took);
  ASSERT_EQ(result.partitions.size(), 1u);
  const PartitionOutcome& outcome = result.partitions[0];
  EXPECT_EQ(outcome.status, "ok") << outcome.error;
  EXPECT_EQ(outcome.replica, good.endpoint());
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_EQ(result.retries, 1);
  EXPECT_FALSE(result.partial);
  EXPECT_EQ(failing.searches(), 1);
  ASSERT_EQ(outcome.hits.size(), 2u);
  EXPECT_EQ(outcome.hits[0].doc, 3u);
  EXPECT_EQ(outcome.hits[0].id, "doc-3");
  EXPECT_LT(took, 1000) << "an error is retried at once, not after the attempt timeout";
}

TEST_F(FanOutTest, ASilentReplicaIsGivenUpAfterAThirdOfTheDeadline) {
  FakeLeaf silent(Behaviour::kSilent, 0, {}, 0), good(Behaviour::kAnswer, 0, {5}, 4);
  start({"0=" + silent.endpoint() + "," + good.endpoint()});
  double took = 0;
  const FanOutResult result = search(1500ms, &took);
  const PartitionOutcome& outcome = result.partitions.at(0);
  EXPECT_EQ(outcome.status, "ok") << outcome.error << "; the cluster: " << cluster_->describe().dump();
  EXPECT_EQ(outcome.replica, good.endpoint());
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_EQ(silent.searches(), 1);
  EXPECT_GE(took, 495) << "the attempt timeout is a third of the deadline";
  EXPECT_LT(took, 1500);
}

TEST_F(FanOutTest, NoAnswerInTimeIsAPartialResultAtTheDeadline) {
  FakeLeaf silent(Behaviour::kSilent, 0, {}, 0), good(Behaviour::kAnswer, 1, {8, 2}, 7);
  start({"0=" + silent.endpoint(), "1=" + good.endpoint()});
  double took = 0;
  const FanOutResult result = search(400ms, &took);
  ASSERT_EQ(result.partitions.size(), 2u);
  EXPECT_TRUE(result.partial);
  EXPECT_EQ(result.partitions[0].status, "timeout");
  EXPECT_EQ(result.partitions[0].attempts, 1) << "no other replica: it waits for the deadline";
  EXPECT_EQ(result.partitions[1].status, "ok");
  EXPECT_GE(took, 395);
  EXPECT_LT(took, 2000);
  const std::vector<const BrokerHit*> merged = merge_hits(result, 10);
  ASSERT_EQ(merged.size(), 2u) << "the partitions that answered still give their hits";
  EXPECT_EQ(merged[0]->doc, 8u);
}

TEST_F(FanOutTest, EveryReplicaFailingLeavesThePartitionInError) {
  FakeLeaf first(Behaviour::kError, 0, {}, 0), second(Behaviour::kError, 0, {}, 0);
  start({"0=" + first.endpoint() + "," + second.endpoint()});
  const FanOutResult result = search(2000ms);
  const PartitionOutcome& outcome = result.partitions.at(0);
  EXPECT_EQ(outcome.status, "error");
  EXPECT_EQ(outcome.error, "no such partition");
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_TRUE(result.partial);
  EXPECT_EQ(first.searches() + second.searches(), 2);
}

TEST_F(FanOutTest, PartitionsAreMergedByScoreThenDocId) {
  FakeLeaf p0(Behaviour::kAnswer, 0, {10, 11, 12}, 5), p1(Behaviour::kAnswer, 1, {20, 21}, 4.5f);
  start({"0=" + p0.endpoint(), "1=" + p1.endpoint()});
  const FanOutResult result = search(2000ms);
  EXPECT_FALSE(result.partial);
  const std::vector<const BrokerHit*> merged = merge_hits(result, 4);
  std::vector<DocId> docs;
  for (const BrokerHit* hit : merged) docs.push_back(hit->doc);
  // Scores: 10→5, 20→4.5, 11→4, 21→3.5, 12→3.
  EXPECT_EQ(docs, (std::vector<DocId>{10, 20, 11, 21}));
}

TEST_F(FanOutTest, ALeafThatDropsItsDirectConnectionMidQueryIsReplacedAtOnce) {
  // The direct path is taken once connected: the first searches may still go over ZeroMQ. The good
  // replica answers slowly, so that the dying one stays the first choice.
  FakeLeaf dying(Behaviour::kDropDirect, 0, {1}, 2, /*direct=*/true),
      good(Behaviour::kAnswer, 0, {7}, 6, /*direct=*/false, 30ms);
  start({"0=" + dying.endpoint() + "," + good.endpoint()}, /*direct=*/true, /*ports=*/1);
  bool moved = false;
  for (int i = 0; i < 50 && !moved; ++i) {
    const int before = dying.searches();
    double took = 0;
    const FanOutResult result = search(6000ms, &took);
    const PartitionOutcome& outcome = result.partitions.at(0);
    ASSERT_EQ(outcome.status, "ok") << outcome.error;
    if (fan_out_->counts().direct.load() > 0 && dying.searches() > before && outcome.replica == good.endpoint() &&
        outcome.attempts == 2) {
      moved = true;
      EXPECT_LT(took, 1500) << "a lost connection moves the attempt without waiting 2 s for its timeout";
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(moved) << "no search went to the dying leaf's direct path and on to the other replica";
}

}  // namespace
}  // namespace warp
