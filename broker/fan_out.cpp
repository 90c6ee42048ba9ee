#include "broker/fan_out.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

zmq::context_t& context() {
  static zmq::context_t shared(2);
  return shared;
}

std::atomic<uint64_t> next_query_id{1};

struct Attempt {
  Replica* replica = nullptr;
  Clock::time_point sent;
};

// One query in flight: its outcome per partition and the attempt each partition waits on.
struct InFlight {
  FanOutRequest request;
  FanOutDone done;
  Clock::time_point start, deadline;
  Clock::duration attempt_timeout;
  FanOutResult result;
  std::map<uint32_t, size_t> slot;  // partition → index in result.partitions
  std::map<uint32_t, std::vector<Replica*>> tried;
  std::map<uint32_t, Attempt> pending;
};

}  // namespace

struct FanOut::Worker {
  Worker(Cluster& cluster, std::atomic<size_t>& in_flight) : cluster(cluster), in_flight(in_flight) {
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) throw Error("fan-out: cannot create an eventfd");
    thread = std::thread([this] { loop(); });
  }
  ~Worker() {
    stop = true;
    wake();
    thread.join();
    ::close(wake_fd);
  }

  void submit(FanOutRequest request, FanOutDone done) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      incoming.emplace_back(std::move(request), std::move(done));
    }
    wake();
  }

 private:
  void wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
  }

  zmq::socket_t& socket_for(const std::string& endpoint) {
    auto& socket = sockets[endpoint];
    if (!socket) {
      socket = std::make_unique<zmq::socket_t>(context(), zmq::socket_type::dealer);
      socket->set(zmq::sockopt::linger, 0);
      socket->set(zmq::sockopt::immediate, 1);  // queue only to a live connection: a dead leaf fails at once
      socket->connect(endpoint);
    }
    return *socket;
  }

  void loop() {
    // Connect to every replica first, so the first queries find live connections.
    for (const std::string& endpoint : cluster.endpoints()) socket_for(endpoint);
    std::vector<zmq::pollitem_t> items;
    std::vector<zmq::socket_t*> polled;
    while (!stop) {
      items.assign(1, {nullptr, wake_fd, ZMQ_POLLIN, 0});
      polled.clear();
      for (auto& [endpoint, socket] : sockets) {
        items.push_back({socket->handle(), 0, ZMQ_POLLIN, 0});
        polled.push_back(socket.get());
      }
      try {
        zmq::poll(items.data(), items.size(), next_timeout());
        if (items[0].revents & ZMQ_POLLIN) take_incoming();
        for (size_t i = 1; i < items.size(); ++i) {
          if (items[i].revents & ZMQ_POLLIN) drain(*polled[i - 1]);
        }
        expire(Clock::now());
      } catch (const std::exception& e) {  // never past the top of the fan-out thread
        std::fprintf(stderr, "warp-broker: fan-out: %s\n", e.what());
      }
    }
    for (auto& [id, query] : queries) release(query);
  }

  // Until the next attempt or query deadline, at most 100 ms.
  std::chrono::milliseconds next_timeout() const {
    Clock::time_point next = Clock::now() + std::chrono::milliseconds(100);
    for (const auto& [id, query] : queries) {
      next = std::min(next, query.deadline);
      for (const auto& [partition, attempt] : query.pending) next = std::min(next, attempt.sent + query.attempt_timeout);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return std::max(wait, std::chrono::milliseconds(0));
  }

  void take_incoming() {
    uint64_t count;
    (void)!::read(wake_fd, &count, sizeof count);
    std::deque<std::pair<FanOutRequest, FanOutDone>> taken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      taken.swap(incoming);
    }
    for (auto& [request, done] : taken) start(std::move(request), std::move(done));
  }

  void start(FanOutRequest request, FanOutDone done) {
    const uint64_t id = next_query_id++;
    InFlight& query = queries[id];
    query.start = Clock::now();
    query.deadline = query.start + request.timeout;
    // A replica silent for this long is given up for another one, while time remains.
    query.attempt_timeout = std::max<Clock::duration>(request.timeout / 3, std::chrono::milliseconds(50));
    query.request = std::move(request);
    query.done = std::move(done);
    for (uint32_t partition : cluster.partitions()) {
      query.slot[partition] = query.result.partitions.size();
      query.result.partitions.push_back({});
      query.result.partitions.back().partition = partition;
    }
    for (uint32_t partition : cluster.partitions()) send(id, query, partition);
    if (query.pending.empty()) finish(id);
  }

  // To the best replica of `partition` not tried yet; none left: the partition is settled.
  void send(uint64_t id, InFlight& query, uint32_t partition) {
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    for (;;) {
      Replica* replica = cluster.choose(partition, query.tried[partition]);
      if (replica == nullptr) {
        if (outcome.attempts == 0) outcome.status = "unavailable";
        query.pending.erase(partition);
        return;
      }
      query.tried[partition].push_back(replica);
      ++outcome.attempts;
      outcome.replica = replica->endpoint;
      if (outcome.attempts > 1) ++query.result.retries;
      capnp::MallocMessageBuilder builder;
      auto search = builder.initRoot<protocol::LeafRequest>().initSearch();
      search.setQueryId(id);
      const std::vector<QueryTerm>& terms = query.request.terms;
      auto list = search.initTerms(static_cast<unsigned>(terms.size()));
      auto counts = search.initTermCounts(static_cast<unsigned>(terms.size()));
      for (size_t i = 0; i < terms.size(); ++i) {
        list.set(static_cast<unsigned>(i), terms[i].text);
        counts.set(static_cast<unsigned>(i), terms[i].count);
      }
      const QueryMode mode = query.request.mode;
      search.setMode(mode == QueryMode::kAnd ? protocol::Mode::AND : mode == QueryMode::kOr ? protocol::Mode::OR : protocol::Mode::AND_OR);
      search.setK(static_cast<uint32_t>(query.request.k));
      search.setPartition(partition);
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(query.deadline - Clock::now());
      search.setDeadlineMicros(static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
      zmq::socket_t& socket = socket_for(replica->endpoint);
      if (socket.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
          socket.send(transfer::to_frame(builder), zmq::send_flags::dontwait)) {
        ++replica->outstanding;
        query.pending[partition] = {replica, Clock::now()};
        return;
      }
      outcome.status = "error";  // no live connection: the next replica at once
      outcome.error = "cannot reach " + replica->endpoint;
    }
  }

  // Every reply waiting on `socket`: [empty delimiter][LeafReply].
  void drain(zmq::socket_t& socket) {
    for (;;) {
      zmq::message_t empty, body;
      if (!socket.recv(empty, zmq::recv_flags::dontwait)) return;
      if (!empty.more() || empty.size() != 0 || !socket.recv(body, zmq::recv_flags::dontwait)) continue;
      if (body.more()) {  // not a reply of ours: skip the rest of the message
        zmq::message_t extra;
        while (socket.recv(extra, zmq::recv_flags::dontwait) && extra.more()) {
        }
        continue;
      }
      try {
        transfer::FrameReader reader(body);
        const auto reply = reader.root<protocol::LeafReply>();
        if (reply.isSearch()) on_reply(reply.getSearch());
      } catch (const std::exception&) {
        // malformed: counts as silence, the attempt times out
      }
    }
  }

  void on_reply(protocol::SearchResponse::Reader response) {
    const uint64_t id = response.getQueryId();
    auto found = queries.find(id);
    if (found == queries.end()) return;  // a late reply to a finished query
    InFlight& query = found->second;
    auto it = query.pending.find(response.getPartition());
    if (it == query.pending.end()) return;
    Replica* replica = it->second.replica;
    --replica->outstanding;
    const uint32_t partition = it->first;
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    query.pending.erase(it);
    if (response.getError().size() > 0) {
      outcome.status = "error";
      outcome.error = response.getError().cStr();
      send(id, query, partition);  // another replica while time remains
    } else {
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - query.start).count();
      cluster.record_latency(*replica, ms);
      outcome.status = "ok";
      outcome.replica = replica->endpoint;
      outcome.error.clear();
      outcome.took_ms = ms;
      outcome.and_matches = response.getAndMatches();
      for (auto hit : response.getHits()) {
        outcome.hits.push_back({hit.getDoc(), hit.getScore(), hit.getExternalId(), hit.getTitle(), hit.getUrl()});
      }
    }
    if (query.pending.empty()) finish(id);
  }

  // Attempts silent too long go to another replica; queries past their deadline end partial.
  void expire(Clock::time_point now) {
    std::vector<uint64_t> finished;
    for (auto& [id, query] : queries) {
      if (now >= query.deadline) {
        finished.push_back(id);
        continue;
      }
      std::vector<uint32_t> stale;
      for (const auto& [partition, attempt] : query.pending) {
        if (now - attempt.sent > query.attempt_timeout) stale.push_back(partition);
      }
      for (uint32_t partition : stale) {
        if (cluster.choose(partition, query.tried[partition]) == nullptr) continue;  // no other replica: keep waiting
        --query.pending[partition].replica->outstanding;
        query.pending.erase(partition);
        send(id, query, partition);
      }
      if (query.pending.empty()) finished.push_back(id);
    }
    for (uint64_t id : finished) finish(id);
  }

  void release(InFlight& query) {
    for (auto& [partition, attempt] : query.pending) --attempt.replica->outstanding;
    query.pending.clear();
  }

  void finish(uint64_t id) {
    auto found = queries.find(id);
    if (found == queries.end()) return;
    InFlight query = std::move(found->second);
    queries.erase(found);
    release(query);
    for (const PartitionOutcome& outcome : query.result.partitions) {
      query.result.partial = query.result.partial || outcome.status != "ok";
    }
    --in_flight;
    try {
      query.done(std::move(query.result));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-broker: fan-out callback: %s\n", e.what());
    }
  }

  Cluster& cluster;
  std::atomic<size_t>& in_flight;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::deque<std::pair<FanOutRequest, FanOutDone>> incoming;
  // Owned by the thread:
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> sockets;  // by endpoint
  std::unordered_map<uint64_t, InFlight> queries;
  std::thread thread;
};

FanOut::FanOut(Cluster& cluster, size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) workers_.push_back(std::make_unique<Worker>(cluster, in_flight_));
}

FanOut::~FanOut() = default;

void FanOut::submit(FanOutRequest request, FanOutDone done) {
  ++in_flight_;
  workers_[next_worker_++ % workers_.size()]->submit(std::move(request), std::move(done));
}

std::vector<BrokerHit> merge_hits(const FanOutResult& result, size_t k) {
  std::vector<BrokerHit> all;
  for (const PartitionOutcome& outcome : result.partitions) all.insert(all.end(), outcome.hits.begin(), outcome.hits.end());
  const auto better = [](const BrokerHit& a, const BrokerHit& b) { return a.score > b.score || (a.score == b.score && a.doc < b.doc); };
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), better);
  all.resize(keep);
  return all;
}

}  // namespace warp
