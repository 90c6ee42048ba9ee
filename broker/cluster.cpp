#include "broker/cluster.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <optional>
#include <set>

#include <zmq.hpp>

#include "broker/dns_resolver.hpp"
#include "broker/leaf_replies.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/status.hpp"

namespace warp {

namespace {

constexpr const char* kDnsPrefix = "dns:";

void sleep_unless(const std::atomic<bool>& stop, std::chrono::milliseconds total) {
  const auto end = std::chrono::steady_clock::now() + total;
  while (!stop && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

Cluster::Cluster(const std::vector<std::string>& specs, transfer::CurveConfig curve, DiscoveryOptions discovery)
    : discovery_(std::move(discovery)), curve_(std::move(curve)) {
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) throw Error("--partition expects ID=ENDPOINT[,ENDPOINT...], got '" + spec + "'");
    uint32_t id;
    try {
      id = static_cast<uint32_t>(std::stoul(spec.substr(0, eq)));
    } catch (...) {
      throw Error("--partition: bad partition id in '" + spec + "'");
    }
    if (std::find(partitions_.begin(), partitions_.end(), id) != partitions_.end()) {
      throw Error("--partition: partition " + std::to_string(id) + " given twice");
    }
    partitions_.push_back(id);
    size_t start = eq + 1;
    while (start <= spec.size()) {
      const size_t comma = spec.find(',', start);
      const std::string entry = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (entry.rfind(kDnsPrefix, 0) == 0) {  // dns:NAME:PORT
        const std::string rest = entry.substr(4);
        const size_t colon = rest.rfind(':');
        const std::string name = colon == std::string::npos ? "" : rest.substr(0, colon);
        const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
        if (name.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
          throw Error("--partition: '" + entry + "' should be dns:NAME:PORT");
        }
        names_.push_back({id, name, port});
      } else if (!entry.empty()) {
        auto replica = std::make_shared<Replica>();
        replica->partition = id;
        replica->endpoint = entry;
        replicas_.push_back(std::move(replica));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (replicas_.empty() && names_.empty()) throw Error("the broker needs at least one --partition ID=ENDPOINT");
  if (curve_.enabled()) leaf_key_ = transfer::curve_server_key(curve_, "leaf");
  if (!names_.empty()) {
    auto resolver = std::make_shared<DnsResolver>(discovery_.dns_server);  // fails here on a bad --dns-server
    discoverer_ = std::thread([this, resolver] {
      while (!stop_) {
        for (const NameSource& source : names_) {
          try {
            const auto addresses = resolver->resolve(source.name, std::chrono::milliseconds(3000));
            if (!addresses) {
              ++dns_failures_;
              std::fprintf(stderr, "warp-broker: DNS: %s (keeping the replicas known)\n",
                           resolver->last_error().c_str());
              continue;
            }
            std::vector<std::string> endpoints;
            for (const std::string& address : *addresses) {
              const bool v6 = address.find(':') != std::string::npos;
              endpoints.push_back("tcp://" + (v6 ? "[" + address + "]" : address) + ":" + source.port);
            }
            const uint64_t before = membership_version_;
            set_replicas(source, endpoints);
            if (membership_version_ != before) {
              std::lock_guard<std::mutex> lock(callback_mutex_);
              if (membership_callback_) membership_callback_();
            }
          } catch (const std::exception& e) {  // never past the top of the thread
            ++dns_failures_;
            std::fprintf(stderr, "warp-broker: DNS: %s: %s\n", source.name.c_str(), e.what());
          }
        }
        sleep_unless(stop_, discovery_.refresh);
      }
    });
  }
  poller_ = std::thread([this] { poll_status(); });
}

Cluster::~Cluster() {
  stop_ = true;
  if (discoverer_.joinable()) discoverer_.join();
  poller_.join();
}

void Cluster::set_replicas(const NameSource& source, const std::vector<std::string>& endpoints) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> wanted(endpoints.begin(), endpoints.end());
  bool changed = false;
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    Replica& replica = **it;
    if (replica.source == source.name && replica.partition == source.partition && !wanted.erase(replica.endpoint)) {
      std::fprintf(stderr, "warp-broker: partition %u: replica %s gone from %s\n", replica.partition,
                   replica.endpoint.c_str(), source.name.c_str());
      replica.healthy = false;  // a query holding it still finishes with it
      it = replicas_.erase(it);
      changed = true;
    } else {
      if (replica.source == source.name && replica.partition == source.partition) wanted.erase(replica.endpoint);
      ++it;
    }
  }
  for (const std::string& endpoint : wanted) {
    auto replica = std::make_shared<Replica>();
    replica->partition = source.partition;
    replica->endpoint = endpoint;
    replica->source = source.name;
    std::fprintf(stderr, "warp-broker: partition %u: replica %s from %s\n", source.partition, endpoint.c_str(),
                 source.name.c_str());
    replicas_.push_back(std::move(replica));
    changed = true;
  }
  if (changed) ++membership_version_;
}

void Cluster::on_membership_change(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(callback_mutex_);
  membership_callback_ = std::move(callback);
}

std::vector<std::shared_ptr<Replica>> Cluster::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replicas_;
}

std::shared_ptr<Replica> Cluster::choose(uint32_t partition, const std::vector<const Replica*>& tried,
                                         uint64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Replica> best;
  bool best_holds = false;
  for (const auto& replica : replicas_) {
    if (replica->partition != partition || !replica->healthy || replica->outstanding >= max_outstanding_) continue;
    if (std::find(tried.begin(), tried.end(), replica.get()) != tried.end()) continue;
    const bool holds = generation == 0 || replica->generation == generation || replica->staged_generation == generation;
    if (best == nullptr || (holds && !best_holds) ||
        (holds == best_holds &&
         (replica->outstanding < best->outstanding ||
          (replica->outstanding == best->outstanding && replica->latency_ms < best->latency_ms)))) {
      best = replica;
      best_holds = holds;
    }
  }
  return best;
}

uint64_t Cluster::common_generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<std::set<uint64_t>> common;
  for (uint32_t partition : partitions_) {
    std::set<uint64_t> held;
    for (const auto& replica : replicas_) {
      if (replica->partition != partition || !replica->healthy) continue;
      if (replica->generation != 0) held.insert(replica->generation);
      if (replica->staged_generation != 0) held.insert(replica->staged_generation);
    }
    if (common) {
      std::set<uint64_t> both;
      std::set_intersection(common->begin(), common->end(), held.begin(), held.end(), std::inserter(both, both.end()));
      common = std::move(both);
    } else {
      common = std::move(held);
    }
  }
  return common && !common->empty() ? *common->rbegin() : 0;
}

bool Cluster::has_other(uint32_t partition, const std::vector<const Replica*>& tried) {
  return choose(partition, tried) != nullptr;
}

void Cluster::record_latency(Replica& replica, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  replica.latency_ms = 0.8 * replica.latency_ms + 0.2 * ms;
}

void Cluster::connect_leaf(zmq::socket_t& socket, const std::string& endpoint) const {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::immediate, 1);  // a dead leaf fails at once instead of queueing
  socket.set(zmq::sockopt::heartbeat_ivl, 500);
  socket.set(zmq::sockopt::heartbeat_timeout, 2000);
  socket.set(zmq::sockopt::connect_timeout, 1000);  // reconnects not held by SYN back-off either
  socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
  if (curve_.enabled()) transfer::make_curve_client(socket, curve_, leaf_key_);
  socket.connect(endpoint);
}

std::vector<std::string> Cluster::endpoints() const {
  std::vector<std::string> endpoints;
  for (const auto& replica : snapshot()) endpoints.push_back(replica->endpoint);
  return endpoints;
}

std::optional<uint32_t> Cluster::saturated_partition() const {
  std::lock_guard<std::mutex> lock(mutex_);
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
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint32_t partition : partitions_) {
    bool any = false;
    for (const auto& replica : replicas_) any = any || (replica->partition == partition && replica->healthy);
    if (!any) return false;
  }
  return true;
}

bool Cluster::serves_writes(uint64_t sequence, std::string* behind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint32_t partition : partitions_) {
    bool any = false;
    for (const auto& replica : replicas_) {
      if (replica->partition != partition || !replica->healthy) continue;
      any = true;
      if (replica->write_sequence < sequence) {
        if (behind)
          *behind = "partition " + std::to_string(partition) + " at " + replica->endpoint + " serves writes up to " +
                    std::to_string(replica->write_sequence.load());
        return false;
      }
    }
    if (!any) {
      if (behind) *behind = "partition " + std::to_string(partition) + " has no healthy replica";
      return false;
    }
  }
  return true;
}

uint64_t Cluster::generation_signature() const {
  std::lock_guard<std::mutex> lock(mutex_);
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

ColumnSchema Cluster::columns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& replica : replicas_) {
    if (!replica->analyzer.empty()) return replica->columns;
  }
  return {};
}

bool Cluster::keeps_positions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& replica : replicas_) {
    if (replica->analyzer.empty()) continue;  // never answered
    if (!replica->positions) return false;
  }
  return true;  // none answered yet: not refused for that (the search finds no replica ready)
}

nlohmann::json Cluster::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = {
      {"ready", true}, {"read_generation", read_generation_.load()}, {"partitions", nlohmann::json::array()}};
  for (uint32_t partition : partitions_) {
    nlohmann::json replicas = nlohmann::json::array(), names = nlohmann::json::array();
    bool any = false;
    for (const auto& r : replicas_) {
      if (r->partition != partition) continue;
      any = any || r->healthy;
      nlohmann::json entry = {{"endpoint", r->endpoint},
                              {"healthy", r->healthy.load()},
                              {"generation", r->generation.load()},
                              {"staged_generation", r->staged_generation.load()},
                              {"write_sequence", r->write_sequence.load()},
                              {"outstanding", r->outstanding.load()},
                              {"latency_ms", r->latency_ms}};
      if (!r->source.empty()) entry["dns"] = r->source;
      if (r->search_port != 0) entry["search_port"] = r->search_port.load();
      replicas.push_back(entry);
    }
    for (const NameSource& source : names_) {
      if (source.partition == partition) names.push_back("dns:" + source.name + ":" + source.port);
    }
    if (!any) out["ready"] = false;
    nlohmann::json p = {{"partition", partition}, {"healthy", any}, {"replicas", replicas}};
    if (!names.empty()) p["discovery"] = names;
    out["partitions"].push_back(p);
  }
  return out;
}

void Cluster::poll_status() {
  zmq::context_t context(1);
  std::map<std::string, std::unique_ptr<zmq::socket_t>> sockets;  // by endpoint, following membership
  // One status request to every replica and up to 400 ms for the answers; a silent one is unhealthy.
  const auto poll_round = [&] {
    const std::vector<std::shared_ptr<Replica>> replicas = snapshot();
    std::set<std::string> current;
    for (const auto& replica : replicas) current.insert(replica->endpoint);
    for (auto it = sockets.begin(); it != sockets.end();)
      it = current.count(it->first) ? std::next(it) : sockets.erase(it);
    std::vector<zmq::socket_t*> socket_list;
    for (const auto& replica : replicas) {
      auto& socket = sockets[replica->endpoint];
      if (!socket) {
        socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
        connect_leaf(*socket, replica->endpoint);
      }
      socket_list.push_back(socket.get());
    }
    std::vector<bool> answered(replicas.size(), false);
    const uint64_t reading = read_generation_;
    for (size_t i = 0; i < socket_list.size(); ++i) {
      zmq::socket_t* socket = socket_list[i];
      capnp::MallocMessageBuilder builder;
      // To a leaf holding a generation staged (one that knows statusAt: older leaves report none),
      // the generation read: it serves it if that is the one.
      if (reading != 0 && replicas[i]->staged_generation != 0)
        builder.initRoot<protocol::LeafRequest>().setStatusAt(reading);
      else
        builder.initRoot<protocol::LeafRequest>().setStatus();
      if (socket->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        (void)socket->send(transfer::to_frame(builder), zmq::send_flags::dontwait);
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
    const auto all_answered = [&] { return std::all_of(answered.begin(), answered.end(), [](bool a) { return a; }); };
    while (std::chrono::steady_clock::now() < deadline && !socket_list.empty() && !all_answered()) {
      poll_leaf_replies(socket_list, std::chrono::milliseconds(50), [&](size_t i, protocol::LeafReply::Reader reply) {
        if (!reply.isStatus()) return;  // a late search reply: not ours
        auto status = reply.getStatus();
        Replica& replica = *replicas[i];
        replica.generation = status.getGeneration();
        replica.staged_generation = status.getStagedGeneration();
        replica.write_sequence = status.getWriteSequence();
        replica.search_port = status.getSearchPort();
        std::lock_guard<std::mutex> lock(mutex_);
        // A replica retired meanwhile stays unhealthy.
        const bool member =
            std::any_of(replicas_.begin(), replicas_.end(), [&](const auto& r) { return r.get() == &replica; });
        replica.healthy = member && status.getReady();
        replica.analyzer = status.getAnalyzer();
        replica.columns = {};
        replica.positions = status.getPositions();
        for (auto field : status.getKeywordFields()) replica.columns.keyword.emplace_back(field.cStr(), field.size());
        for (auto field : status.getNumericFields()) replica.columns.numeric.emplace_back(field.cStr(), field.size());
        answered[i] = true;
      });
    }
    if (socket_list.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (size_t i = 0; i < replicas.size(); ++i) {
      if (!answered[i]) replicas[i]->healthy = false;
    }
    read_generation_ = common_generation();
  };
  while (!stop_) {
    try {
      poll_round();
    } catch (const std::exception& e) {  // never past the top of the poller thread
      std::fprintf(stderr, "warp-broker: status poll failed: %s\n", e.what());
    }
    sleep_unless(stop_, std::chrono::milliseconds(100));
  }
}

}  // namespace warp
