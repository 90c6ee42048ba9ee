#include "broker/fan_out.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <unordered_map>
#include <zmq.hpp>

#include "broker/leaf_replies.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;

zmq::context_t& context() {
  static zmq::context_t shared(2);
  return shared;
}

// Each HTTP worker thread keeps one DEALER socket per replica.
zmq::socket_t& socket_for(const std::string& endpoint) {
  thread_local std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> sockets;
  auto& socket = sockets[endpoint];
  if (!socket) {
    socket = std::make_unique<zmq::socket_t>(context(), zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::immediate, 1);  // queue only to a live connection: a dead leaf fails at once
    socket->connect(endpoint);
  }
  return *socket;
}

std::atomic<uint64_t> next_query_id{1};

struct Attempt {
  Replica* replica = nullptr;
  Clock::time_point sent;
};

}  // namespace

FanOutResult fan_out(Cluster& cluster, const std::vector<QueryTerm>& terms, QueryMode mode, size_t k,
                     std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  // A replica silent for this long is given up for another one, while time remains.
  const auto attempt_timeout = std::max(timeout / 3, std::chrono::milliseconds(50));
  const uint64_t query_id = next_query_id++;
  FanOutResult result;
  std::map<uint32_t, size_t> slot;  // partition → index in result.partitions
  std::map<uint32_t, std::vector<Replica*>> tried;
  std::map<uint32_t, Attempt> pending;

  const auto send = [&](uint32_t partition) {
    PartitionOutcome& outcome = result.partitions[slot[partition]];
    for (;;) {
      Replica* replica = cluster.choose(partition, tried[partition]);
      if (replica == nullptr) {
        if (outcome.attempts == 0) outcome.status = "unavailable";
        pending.erase(partition);
        return;
      }
      tried[partition].push_back(replica);
      ++outcome.attempts;
      outcome.replica = replica->endpoint;
      if (outcome.attempts > 1) ++result.retries;
      capnp::MallocMessageBuilder builder;
      auto search = builder.initRoot<protocol::LeafRequest>().initSearch();
      search.setQueryId(query_id);
      auto list = search.initTerms(static_cast<unsigned>(terms.size()));
      auto counts = search.initTermCounts(static_cast<unsigned>(terms.size()));
      for (size_t i = 0; i < terms.size(); ++i) {
        list.set(static_cast<unsigned>(i), terms[i].text);
        counts.set(static_cast<unsigned>(i), terms[i].count);
      }
      search.setMode(mode == QueryMode::kAnd ? protocol::Mode::AND : mode == QueryMode::kOr ? protocol::Mode::OR : protocol::Mode::AND_OR);
      search.setK(static_cast<uint32_t>(k));
      search.setPartition(partition);
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
      search.setDeadlineMicros(static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
      zmq::socket_t& socket = socket_for(replica->endpoint);
      // Not connected yet (a new socket) or not any more (a dead leaf): wait briefly for the link.
      zmq::pollitem_t writable{socket.handle(), 0, ZMQ_POLLOUT, 0};
      zmq::poll(&writable, 1, std::chrono::milliseconds(20));
      if (socket.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
          socket.send(transfer::to_frame(builder), zmq::send_flags::dontwait)) {
        ++replica->outstanding;
        pending[partition] = {replica, Clock::now()};
        return;
      }
      outcome.status = "error";  // no live connection: the next replica at once
      outcome.error = "cannot reach " + replica->endpoint;
    }
  };

  for (uint32_t partition : cluster.partitions()) {
    slot[partition] = result.partitions.size();
    result.partitions.push_back({});
    result.partitions.back().partition = partition;
  }
  for (uint32_t partition : cluster.partitions()) send(partition);

  while (!pending.empty() && Clock::now() < deadline) {
    std::vector<zmq::socket_t*> sockets;
    for (const auto& [partition, attempt] : pending) {
      zmq::socket_t* socket = &socket_for(attempt.replica->endpoint);
      if (std::find(sockets.begin(), sockets.end(), socket) == sockets.end()) sockets.push_back(socket);
    }
    poll_leaf_replies(sockets, std::chrono::milliseconds(5), [&](size_t, protocol::LeafReply::Reader reply) {
      if (!reply.isSearch()) return;
      auto response = reply.getSearch();
      auto it = pending.find(response.getPartition());
      if (response.getQueryId() != query_id || it == pending.end()) return;  // late reply to another query
      Replica* replica = it->second.replica;
      --replica->outstanding;
      PartitionOutcome& outcome = result.partitions[slot[it->first]];
      const uint32_t partition = it->first;
      pending.erase(it);
      if (response.getError().size() > 0) {
        outcome.status = "error";
        outcome.error = response.getError().cStr();
        send(partition);  // another replica while time remains
        return;
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      cluster.record_latency(*replica, ms);
      outcome.status = "ok";
      outcome.replica = replica->endpoint;
      outcome.error.clear();
      outcome.took_ms = ms;
      outcome.and_matches = response.getAndMatches();
      for (auto hit : response.getHits()) {
        outcome.hits.push_back({hit.getDoc(), hit.getScore(), hit.getExternalId(), hit.getTitle(), hit.getUrl()});
      }
    });
    const auto now = Clock::now();
    std::vector<uint32_t> stale;
    for (const auto& [partition, attempt] : pending) {
      if (now - attempt.sent > attempt_timeout) stale.push_back(partition);
    }
    for (uint32_t partition : stale) {
      if (cluster.choose(partition, tried[partition]) == nullptr) continue;  // no other replica: keep waiting
      --pending[partition].replica->outstanding;
      pending.erase(partition);
      send(partition);
    }
  }
  for (auto& [partition, attempt] : pending) --attempt.replica->outstanding;
  for (const PartitionOutcome& outcome : result.partitions) result.partial = result.partial || outcome.status != "ok";
  return result;
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
