#include "broker/cluster.hpp"

#include <cstdio>

#include <zmq.hpp>

#include "common/protocol/search.capnp.h"
#include "broker/leaf_replies.hpp"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/status.hpp"

namespace warp {

Cluster::Cluster(const std::vector<std::string>& specs, transfer::CurveConfig curve) : curve_(std::move(curve)) {
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) throw Error("--partition expects ID=ENDPOINT[,ENDPOINT...], got '" + spec + "'");
    uint32_t id;
    try {
      id = static_cast<uint32_t>(std::stoul(spec.substr(0, eq)));
    } catch (...) {
      throw Error("--partition: bad partition id in '" + spec + "'");
    }
    partitions_.push_back(id);
    size_t start = eq + 1;
    while (start <= spec.size()) {
      const size_t comma = spec.find(',', start);
      const std::string endpoint = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!endpoint.empty()) {
        replicas_.push_back(std::make_unique<Replica>());
        replicas_.back()->partition = id;
        replicas_.back()->endpoint = endpoint;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (replicas_.empty()) throw Error("the broker needs at least one --partition ID=ENDPOINT");
  if (curve_.enabled()) leaf_key_ = transfer::curve_server_key(curve_, "leaf");
  poller_ = std::thread([this] { poll_status(); });
}

Cluster::~Cluster() {
  stop_ = true;
  poller_.join();
}

Replica* Cluster::choose(uint32_t partition, const std::vector<Replica*>& tried) {
  std::lock_guard<std::mutex> lock(mutex_);
  Replica* best = nullptr;
  for (const auto& replica : replicas_) {
    if (replica->partition != partition || !replica->healthy || replica->outstanding >= max_outstanding_) continue;
    if (std::find(tried.begin(), tried.end(), replica.get()) != tried.end()) continue;
    if (best == nullptr || replica->outstanding < best->outstanding ||
        (replica->outstanding == best->outstanding && replica->latency_ms < best->latency_ms)) {
      best = replica.get();
    }
  }
  return best;
}

void Cluster::record_latency(Replica& replica, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  replica.latency_ms = 0.8 * replica.latency_ms + 0.2 * ms;
}

void Cluster::secure(zmq::socket_t& socket) const {
  if (curve_.enabled()) transfer::make_curve_client(socket, curve_, leaf_key_);
}

std::vector<std::string> Cluster::endpoints() const {
  std::vector<std::string> endpoints;
  for (const auto& replica : replicas_) endpoints.push_back(replica->endpoint);
  return endpoints;
}

std::optional<uint32_t> Cluster::saturated_partition() const {
  for (uint32_t partition : partitions_) {
    bool healthy = false, room = false;
    for (const auto& replica : replicas_) {
      if (replica->partition != partition || !replica->healthy) continue;
      healthy = true;
      room = room || replica->outstanding < max_outstanding_;
    }
    if (healthy && !room) return partition;
  }
  return std::nullopt;
}

bool Cluster::ready() const {
  for (uint32_t partition : partitions_) {
    bool any = false;
    for (const auto& replica : replicas_) any = any || (replica->partition == partition && replica->healthy);
    if (!any) return false;
  }
  return true;
}

uint64_t Cluster::generation_signature() const {
  uint64_t signature = 1469598103934665603ull;
  for (const auto& replica : replicas_) signature = (signature ^ replica->generation.load()) * 1099511628211ull;
  return signature;
}

std::string Cluster::analyzer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& replica : replicas_) {
    if (!replica->analyzer.empty()) return replica->analyzer;
  }
  return {};
}

nlohmann::json Cluster::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = {{"ready", true}, {"partitions", nlohmann::json::array()}};
  for (uint32_t partition : partitions_) {
    nlohmann::json replicas = nlohmann::json::array();
    bool any = false;
    for (const auto& r : replicas_) {
      if (r->partition != partition) continue;
      any = any || r->healthy;
      replicas.push_back({{"endpoint", r->endpoint}, {"healthy", r->healthy.load()}, {"generation", r->generation.load()},
                          {"outstanding", r->outstanding.load()}, {"latency_ms", r->latency_ms}});
    }
    if (!any) out["ready"] = false;
    out["partitions"].push_back({{"partition", partition}, {"healthy", any}, {"replicas", replicas}});
  }
  return out;
}

void Cluster::poll_status() {
  zmq::context_t context(1);
  std::vector<std::unique_ptr<zmq::socket_t>> sockets;
  std::vector<zmq::socket_t*> socket_list;
  for (const auto& replica : replicas_) {
    sockets.push_back(std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer));
    sockets.back()->set(zmq::sockopt::linger, 0);
    sockets.back()->set(zmq::sockopt::immediate, 1);
    secure(*sockets.back());
    sockets.back()->connect(replica->endpoint);
    socket_list.push_back(sockets.back().get());
  }
  // One status request to every replica and up to 400 ms for the answers; a silent one is unhealthy.
  const auto poll_round = [&] {
    std::vector<bool> answered(replicas_.size(), false);
    for (auto& socket : sockets) {
      capnp::MallocMessageBuilder builder;
      builder.initRoot<protocol::LeafRequest>().setStatus();
      if (socket->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        (void)socket->send(transfer::to_frame(builder), zmq::send_flags::dontwait);
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
    while (std::chrono::steady_clock::now() < deadline) {
      poll_leaf_replies(socket_list, std::chrono::milliseconds(50), [&](size_t i, protocol::LeafReply::Reader reply) {
        if (!reply.isStatus()) return;  // a late search reply: not ours
        auto status = reply.getStatus();
        Replica& replica = *replicas_[i];
        replica.generation = status.getGeneration();
        replica.healthy = status.getReady();
        std::lock_guard<std::mutex> lock(mutex_);
        replica.analyzer = status.getAnalyzer();
        answered[i] = true;
      });
    }
    for (size_t i = 0; i < replicas_.size(); ++i) {
      if (!answered[i]) replicas_[i]->healthy = false;
    }
  };
  while (!stop_) {
    try {
      poll_round();
    } catch (const std::exception& e) {  // never past the top of the poller thread
      std::fprintf(stderr, "warp-broker: status poll failed: %s\n", e.what());
    }
    for (int i = 0; i < 2 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace warp
