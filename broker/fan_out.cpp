#include "broker/fan_out.hpp"

#include <unistd.h>

#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>
#include <zmq.hpp>

#include "common/http/io_pool.hpp"

#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/secure_channel.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> next_query_id{1};

struct Attempt {
  std::shared_ptr<Replica> replica;  // kept alive even if discovery retires it meanwhile
  Clock::time_point sent;
  bool direct = false;  // over the direct search path (a lost connection moves it at once)
};

// One query in flight: its outcome per partition and the attempt each partition waits on.
struct InFlight {
  FanOutRequest request;
  FanOutDone done;
  Clock::time_point start, deadline;
  Clock::duration attempt_timeout;
  FanOutResult result;
  std::map<uint32_t, size_t> slot;  // partition → index in result.partitions
  std::map<uint32_t, std::vector<const Replica*>> tried;
  std::map<uint32_t, Attempt> pending;
};

}  // namespace

// One loop's part of the fan-out: its sockets, its queries in flight and one timer for the next
// attempt timeout or deadline among them. Runs only on its loop.
struct FanOut::Worker {
  // A DEALER socket watched on the loop through a duplicate of its ZMQ_FD. That descriptor is
  // edge-triggered: after a wake-up, and after every send, messages are drained while ZMQ_EVENTS
  // says some are waiting.
  struct Socket {
    Socket(asio::io_context& io, zmq::context_t& context, const Cluster& cluster, const std::string& endpoint)
        : zmq_socket(context, zmq::socket_type::dealer), descriptor(io) {
      cluster.connect_leaf(zmq_socket, endpoint);
      descriptor.assign(::dup(zmq_socket.get(zmq::sockopt::fd)));
    }
    zmq::socket_t zmq_socket;
    asio::posix::stream_descriptor descriptor;
    bool drain_posted = false;
  };

  // A connection of the direct search path to one leaf (its status names the port): frames of
  // secure_channel.hpp, after a Curve handshake where Curve is on. Usable once connected (and
  // handshaken); until then, and after it fails, searches to that leaf go over ZeroMQ.
  // A replica named by host name rather than address has the name resolved (asynchronously, on the
  // loop) before each connection, so a connection remade after a loss follows the name's address.
  struct DirectLink {
    DirectLink(asio::io_context& io, std::string endpoint, std::string host, uint16_t port)
        : endpoint(std::move(endpoint)), host(std::move(host)), port(port), socket(io), reconnect(io), resolver(io) {}
    std::string endpoint;  // the leaf's ZeroMQ endpoint: the replica's name
    std::string host;      // its host: an address, or a name to resolve
    uint16_t port;         // the direct path's, from the leaf's status
    asio::ip::tcp::socket socket;
    asio::steady_timer reconnect;
    asio::ip::tcp::resolver resolver;
    std::optional<transfer::ClientHandshake> handshake;  // in progress
    std::optional<transfer::SecureSession> session;      // Curve on, after the handshake
    bool usable = false;
    std::array<char, 16384> buffer;  // each link its own: reads of several may complete before any handler runs
    std::string in;                  // bytes read, not yet whole frames
    std::string out;                 // bytes a write could not take at once, being written (asio holds its address)
    std::string queued;              // bytes to write after those
    bool writing = false;
  };

  Worker(Cluster& cluster, asio::io_context& io, zmq::context_t& context, std::atomic<size_t>& in_flight, bool direct,
         FanOut::Counts& counts)
      : cluster(cluster),
        io(io),
        context(context),
        in_flight(in_flight),
        timer(io),
        direct(direct),
        sent_by_path(counts) {
    follow_membership();
  }

  // Sockets to every current replica, so queries find live connections; those of retired replicas
  // closed (an attempt still waiting on one times out and goes to another replica).
  void follow_membership() {
    const uint64_t version = cluster.membership_version();
    if (version == membership_version && !sockets.empty()) return;
    membership_version = version;
    const std::vector<std::string> endpoints = cluster.endpoints();
    for (auto it = sockets.begin(); it != sockets.end();) {
      it = std::find(endpoints.begin(), endpoints.end(), it->first) == endpoints.end() ? sockets.erase(it)
                                                                                       : std::next(it);
    }
    for (auto it = links.begin(); it != links.end();) {
      it =
          std::find(endpoints.begin(), endpoints.end(), it->first) == endpoints.end() ? links.erase(it) : std::next(it);
    }
    for (const std::string& endpoint : endpoints) socket_for(endpoint);
  }

  Socket& socket_for(const std::string& endpoint) {
    auto& socket = sockets[endpoint];
    if (!socket) {
      socket = std::make_shared<Socket>(io, context, cluster, endpoint);
      watch(socket);
    }
    return *socket;
  }

  // The direct link to `replica` when its status offers one and it is ready; null otherwise (the
  // search goes over ZeroMQ). A link is made, or remade for a new port, on first need.
  std::shared_ptr<DirectLink>* direct_link(const Replica& replica) {
    const uint16_t port = replica.search_port;
    if (!direct || port == 0) return nullptr;
    auto& link = links[replica.endpoint];
    if (!link || link->port != port) {
      // "tcp://HOST:PORT" (HOST an address, [an IPv6 address] or a name): the leaf's host, the
      // status's port.
      const std::string rest = replica.endpoint.substr(replica.endpoint.find("://") + 3);
      std::string host = rest.substr(0, rest.rfind(':'));
      if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      link = std::make_shared<DirectLink>(io, replica.endpoint, std::move(host), port);
      connect(link);
    }
    return link->usable ? &link : nullptr;
  }

  // Connects to the link's host: at once to an address; to a name once resolved, trying each of
  // its addresses in turn. A name that does not resolve fails like a refused connection (retried).
  void connect(const std::shared_ptr<DirectLink>& link) {
    boost::system::error_code ec;
    const asio::ip::address address = asio::ip::make_address(link->host, ec);
    if (!ec) {
      link->socket.async_connect(
          asio::ip::tcp::endpoint(address, link->port),
          [this, weak = std::weak_ptr<DirectLink>(link)](boost::system::error_code ec) { connected(weak, ec); });
      return;
    }
    link->resolver.async_resolve(
        link->host, std::to_string(link->port), asio::ip::resolver_base::numeric_service,
        [this, weak = std::weak_ptr<DirectLink>(link)](boost::system::error_code ec,
                                                       asio::ip::tcp::resolver::results_type found) {
          auto link = weak.lock();
          if (!link || ec == asio::error::operation_aborted) return;
          if (ec) return link_failed(link, kResolveRetry);  // getaddrinfo at most once a second a link
          asio::async_connect(
              link->socket, found,
              [this, weak](boost::system::error_code ec, const asio::ip::tcp::endpoint&) { connected(weak, ec); });
        });
  }

  void connected(const std::weak_ptr<DirectLink>& weak, boost::system::error_code ec) {
    auto link = weak.lock();
    if (!link) return;
    if (ec) return link_failed(link);
    boost::system::error_code ignored;
    link->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    link->socket.non_blocking(true, ignored);
    link->in.clear();
    if (cluster.curve().enabled()) {
      try {
        link->handshake.emplace(cluster.curve().own, cluster.leaf_key());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warp-broker: direct search path to %s: %s\n", link->endpoint.c_str(), e.what());
        return;  // stays on ZeroMQ
      }
      std::string hello;
      transfer::append_stream_frame(hello, link->handshake->hello());
      write(link, std::move(hello));
    } else {
      link->usable = true;
    }
    read(link);
  }

  // The link is closed and made again in a while; searches waiting on it go to another replica
  // at once (a leaf that died: no need to wait for the attempt timeout).
  static constexpr std::chrono::milliseconds kReconnect{200}, kResolveRetry{1000};
  void link_failed(const std::shared_ptr<DirectLink>& link, std::chrono::milliseconds retry = kReconnect) {
    const bool was_usable = link->usable;
    link->usable = false;
    link->handshake.reset();
    link->session.reset();
    link->out.clear();
    link->queued.clear();
    link->writing = false;
    boost::system::error_code ignored;
    link->socket.close(ignored);
    link->reconnect.expires_after(retry);
    link->reconnect.async_wait([this, weak = std::weak_ptr<DirectLink>(link)](boost::system::error_code ec) {
      auto link = weak.lock();
      if (ec || !link || links[link->endpoint] != link) return;
      connect(link);
    });
    if (was_usable) abandon_direct(link->endpoint);
  }

  void abandon_direct(const std::string& endpoint) {
    std::vector<std::pair<uint64_t, uint32_t>> lost;
    for (auto& [id, query] : queries) {
      for (const auto& [partition, attempt] : query.pending) {
        if (attempt.direct && attempt.replica->endpoint == endpoint) lost.emplace_back(id, partition);
      }
    }
    for (const auto& [id, partition] : lost) {
      auto found = queries.find(id);
      if (found == queries.end()) continue;
      InFlight& query = found->second;
      auto it = query.pending.find(partition);
      // Gone, or already sent elsewhere by a send() above (a nested loss): nothing to move.
      if (it == query.pending.end() || !it->second.direct || it->second.replica->endpoint != endpoint) continue;
      --it->second.replica->outstanding;
      query.pending.erase(it);
      PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
      outcome.status = "error";
      outcome.error = "connection to " + endpoint + " lost";
      send(id, query, partition);
      if (query.pending.empty()) {
        // Finished on the loop's next turn, not here: this may run inside send() for this very
        // query (a leaf serving several of its partitions), which still holds it.
        asio::post(io, [this, query_id = id] {  // a copy: clang cannot capture a structured binding
          auto found = queries.find(query_id);
          if (found != queries.end() && found->second.pending.empty()) finish(query_id);
        });
      } else {
        schedule(Clock::now() + query.attempt_timeout);
      }
    }
  }

  void read(const std::shared_ptr<DirectLink>& link) {
    link->socket.async_read_some(asio::buffer(link->buffer), [this, weak = std::weak_ptr<DirectLink>(link)](
                                                                 boost::system::error_code ec, size_t n) {
      auto link = weak.lock();
      if (!link) return;
      if (ec) return link_failed(link);
      link->in.append(link->buffer.data(), n);
      size_t at = 0;
      try {
        while (auto body = transfer::next_stream_frame(link->in, at)) {
          if (link->handshake && !link->handshake->welcomed()) {  // the WELCOME: the INITIATE goes back
            const std::optional<std::string> initiate = link->handshake->welcome(*body);
            if (!initiate) throw Error("the leaf's WELCOME does not prove its Curve key");
            std::string frame;
            transfer::append_stream_frame(frame, *initiate);
            write(link, std::move(frame));
            if (!link->socket.is_open()) return;  // the write failed: the link is remade
            continue;
          }
          if (link->handshake) {  // the READY: the leaf took the INITIATE
            link->session = link->handshake->ready(*body);
            link->handshake.reset();
            if (!link->session) throw Error("the leaf's READY does not open (the broker's key refused?)");
            link->usable = true;
            continue;
          }
          std::optional<std::string> opened;
          if (link->session && !(opened = link->session->open(*body))) throw Error("a reply that does not open");
          on_frame(opened ? std::string_view(*opened) : *body);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warp-broker: direct search path to %s: %s\n", link->endpoint.c_str(), e.what());
        return link_failed(link);
      }
      link->in.erase(0, at);
      if (link->socket.is_open()) read(link);  // closed meanwhile: a failed write remakes it
    });
  }

  // A reply from either path: a LeafReply.
  void on_frame(std::string_view body) {
    try {
      auto reader = std::make_shared<transfer::FrameReader>(body.data(), body.size());
      const auto reply = reader->root<protocol::LeafReply>();
      if (reply.isSearch()) on_reply(reply.getSearch(), std::move(reader));
    } catch (const std::exception&) {
      // malformed: counts as silence, the attempt times out
    }
  }

  // Written at once where the socket takes it; else after what is being written, in order.
  void write(const std::shared_ptr<DirectLink>& link, std::string frame) {
    if (link->writing) {
      link->queued += frame;
      return;
    }
    boost::system::error_code ec;
    const size_t written = link->socket.write_some(asio::buffer(frame), ec);
    if (ec && ec != asio::error::would_block) return link_failed(link);
    if (written == frame.size()) return;
    link->out = frame.substr(written);
    flush(link);
  }

  // Writes `out` (untouched until done), then what was queued meanwhile.
  void flush(const std::shared_ptr<DirectLink>& link) {
    link->writing = true;
    asio::async_write(link->socket, asio::buffer(link->out),
                      [this, weak = std::weak_ptr<DirectLink>(link)](boost::system::error_code ec, size_t) {
                        auto link = weak.lock();
                        if (!link || ec == asio::error::operation_aborted) return;
                        link->writing = false;
                        if (ec) return link_failed(link);
                        link->out = std::move(link->queued);
                        link->queued.clear();
                        if (!link->out.empty()) flush(link);
                      });
  }

  // Handlers hold the socket weakly: one closed meanwhile is skipped.
  void watch(const std::shared_ptr<Socket>& socket) {
    socket->descriptor.async_wait(asio::posix::stream_descriptor::wait_read,
                                  [this, weak = std::weak_ptr<Socket>(socket)](boost::system::error_code ec) {
                                    auto socket = weak.lock();
                                    if (ec || !socket) return;  // the loop stops, or the socket was closed
                                    drain(*socket);
                                    watch(socket);
                                  });
  }

  // After a send the descriptor may not signal again for replies already waiting: drain soon.
  void drain_soon(const std::string& endpoint) {
    auto found = sockets.find(endpoint);
    if (found == sockets.end() || found->second->drain_posted) return;
    found->second->drain_posted = true;
    asio::post(io, [this, weak = std::weak_ptr<Socket>(found->second)] {
      auto socket = weak.lock();
      if (!socket) return;
      socket->drain_posted = false;
      drain(*socket);
    });
  }

  // Every reply waiting on the socket: [empty delimiter][LeafReply].
  void drain(Socket& socket) {
    try {
      while (socket.zmq_socket.get(zmq::sockopt::events) & ZMQ_POLLIN) {
        zmq::message_t empty, body;
        if (!socket.zmq_socket.recv(empty, zmq::recv_flags::dontwait)) break;
        if (!empty.more() || empty.size() != 0 || !socket.zmq_socket.recv(body, zmq::recv_flags::dontwait)) continue;
        if (body.more()) {  // not a reply of ours: skip the rest of the message
          zmq::message_t extra;
          while (socket.zmq_socket.recv(extra, zmq::recv_flags::dontwait) && extra.more()) {
          }
          continue;
        }
        on_frame(std::string_view(static_cast<const char*>(body.data()), body.size()));
      }
    } catch (const std::exception& e) {  // never past the top of the loop
      std::fprintf(stderr, "warp-broker: fan-out: %s\n", e.what());
    }
  }

  void start(FanOutRequest request, FanOutDone done) {
    follow_membership();
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
    if (query.pending.empty()) {
      finish(id);
    } else {
      schedule(query.start + query.attempt_timeout);
    }
  }

  // The timer fires at `when` if that is before what it waits for now.
  void schedule(Clock::time_point when) {
    if (timer_armed && when >= timer_at) return;
    timer_armed = true;
    timer_at = when;
    timer.expires_at(when);
    timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;  // re-armed earlier, or the loop stops
      timer_armed = false;
      const Clock::time_point now = Clock::now();
      expire(now);
      // Attempts past their timeout that stay (no other replica) wait for the deadline.
      Clock::time_point next = Clock::time_point::max();
      for (const auto& [id, query] : queries) {
        next = std::min(next, query.deadline);
        for (const auto& [partition, attempt] : query.pending) {
          if (attempt.sent + query.attempt_timeout > now) next = std::min(next, attempt.sent + query.attempt_timeout);
        }
      }
      if (next != Clock::time_point::max()) schedule(next);
    });
  }
  // To the best replica of `partition` not tried yet; none left: the partition is settled.
  void send(uint64_t id, InFlight& query, uint32_t partition) {
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    for (;;) {
      std::shared_ptr<Replica> replica = cluster.choose(partition, query.tried[partition]);
      if (replica == nullptr) {
        if (outcome.attempts == 0) outcome.status = "unavailable";
        query.pending.erase(partition);
        return;
      }
      query.tried[partition].push_back(replica.get());
      ++outcome.attempts;
      outcome.replica = replica->endpoint;
      if (outcome.attempts > 1) ++query.result.retries;
      capnp::MallocMessageBuilder builder(64);  // a request of a few terms: not capnp's 8 KiB calloc
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
      search.setMode(mode == QueryMode::kAnd  ? protocol::Mode::AND
                     : mode == QueryMode::kOr ? protocol::Mode::OR
                                              : protocol::Mode::AND_OR);
      search.setK(static_cast<uint32_t>(query.request.k));
      search.setPartition(partition);
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(query.deadline - Clock::now());
      search.setDeadlineMicros(static_cast<uint64_t>(std::max<int64_t>(0, left.count())));
      // Taken before the send: the leaf may read the request before this thread runs again, and its
      // time must lie within the round trip (the stages, search_api.cpp).
      const Clock::time_point sent_at = Clock::now();
      bool sent;
      std::shared_ptr<DirectLink>* const link = direct_link(*replica);
      if (link != nullptr) {
        const std::shared_ptr<DirectLink> held = *link;  // alive through a failed write's retries
        const kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
        const std::string_view request(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
        std::string frame;
        transfer::append_stream_frame(frame, held->session ? held->session->seal(request) : std::string(request));
        write(held, std::move(frame));
        sent = held->usable;  // false: the write failed, and the link is remade
        ++sent_by_path.direct;
      } else {
        Socket& socket = socket_for(replica->endpoint);
        sent = socket.zmq_socket.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
               socket.zmq_socket.send(transfer::to_frame(builder), zmq::send_flags::dontwait);
        drain_soon(replica->endpoint);
        ++sent_by_path.zmq;
      }
      if (sent) {
        ++replica->outstanding;
        query.pending[partition] = {replica, sent_at, link != nullptr};
        return;
      }
      outcome.status = "error";  // no live connection: the next replica at once
      outcome.error = "cannot reach " + replica->endpoint;
    }
  }

  void on_reply(protocol::SearchResponse::Reader response, std::shared_ptr<const transfer::FrameReader> reader) {
    const uint64_t id = response.getQueryId();
    auto found = queries.find(id);
    if (found == queries.end()) return;  // a late reply to a finished query
    InFlight& query = found->second;
    auto it = query.pending.find(response.getPartition());
    if (it == query.pending.end()) return;
    std::shared_ptr<Replica> replica = it->second.replica;
    --replica->outstanding;
    const uint32_t partition = it->first;
    const Clock::time_point sent = it->second.sent;
    PartitionOutcome& outcome = query.result.partitions[query.slot[partition]];
    query.pending.erase(it);
    if (response.getError().size() > 0) {
      outcome.status = "error";
      outcome.error = response.getError().cStr();
      send(id, query, partition);  // another replica while time remains
      schedule(Clock::now() + query.attempt_timeout);
    } else {
      const Clock::time_point now = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - query.start).count();
      cluster.record_latency(*replica, ms);
      outcome.round_trip_ms = std::chrono::duration<double, std::milli>(now - sent).count();
      outcome.leaf_ms = static_cast<double>(response.getLeafMicros()) / 1000;
      outcome.status = "ok";
      outcome.replica = replica->endpoint;
      outcome.error.clear();
      outcome.took_ms = ms;
      outcome.and_matches = response.getAndMatches();
      outcome.hits.reserve(response.getHits().size());
      const auto text = [](capnp::Text::Reader t) { return std::string_view(t.cStr(), t.size()); };
      for (auto hit : response.getHits()) {
        outcome.hits.push_back(
            {hit.getDoc(), hit.getScore(), text(hit.getExternalId()), text(hit.getTitle()), text(hit.getUrl())});
      }
      outcome.reply = std::move(reader);  // keeps the hits' strings
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
        if (!cluster.has_other(partition, query.tried[partition])) continue;  // no other replica: keep waiting
        auto attempt = query.pending.find(partition);
        if (attempt == query.pending.end()) continue;  // moved meanwhile (a direct link lost by a send above)
        --attempt->second.replica->outstanding;
        query.pending.erase(attempt);
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
  asio::io_context& io;
  zmq::context_t& context;
  std::atomic<size_t>& in_flight;
  asio::steady_timer timer;
  const bool direct;  // the direct search path where a leaf offers one
  FanOut::Counts& sent_by_path;
  bool timer_armed = false;
  Clock::time_point timer_at;
  std::unordered_map<std::string, std::shared_ptr<Socket>> sockets;    // by endpoint
  std::unordered_map<std::string, std::shared_ptr<DirectLink>> links;  // by the leaf's ZeroMQ endpoint
  uint64_t membership_version = 0;
  std::unordered_map<uint64_t, InFlight> queries;
};

// ZeroMQ I/O threads: by default one per eight event loops (at least one). Every message to or
// from a leaf crosses one of them, and each wake-up of one costs more than the message's work, so
// fewer, busier I/O threads carry a query for less CPU than many idle ones.
FanOut::FanOut(Cluster& cluster, http::IoPool& pool, size_t zmq_io_threads, bool direct)
    : cluster_(cluster),
      pool_(pool),
      context_(std::make_unique<zmq::context_t>(
          static_cast<int>(zmq_io_threads > 0 ? zmq_io_threads : std::max<size_t>(1, (pool.size() + 7) / 8)))) {
  for (size_t i = 0; i < pool.size(); ++i) {
    workers_.push_back(std::make_unique<Worker>(cluster, pool.context(i), *context_, in_flight_, direct, counts_));
  }
  // Sockets to discovered replicas are connected as soon as they appear, before the status poll
  // finds them healthy, so the first query sent to one finds a live connection.
  const auto follow = [this] {
    for (auto& worker : workers_) asio::post(worker->io, [w = worker.get()] { w->follow_membership(); });
  };
  cluster.on_membership_change(follow);
  follow();  // and whatever changed before the callback was in place
}

FanOut::~FanOut() {
  cluster_.on_membership_change({});
  for (auto& worker : workers_) {
    for (auto& [id, query] : worker->queries) worker->release(query);
  }
}

void FanOut::submit(FanOutRequest request, FanOutDone done) {
  ++in_flight_;
  const int current = pool_.current();
  if (current >= 0) return workers_[static_cast<size_t>(current)]->start(std::move(request), std::move(done));
  Worker& worker = *workers_[next_worker_++ % workers_.size()];
  asio::post(worker.io, [&worker, request = std::move(request), done = std::move(done)]() mutable {
    worker.start(std::move(request), std::move(done));
  });
}

std::vector<const BrokerHit*> merge_hits(const FanOutResult& result, size_t k) {
  std::vector<const BrokerHit*> all;  // pointers: the hits' strings are not copied
  for (const PartitionOutcome& outcome : result.partitions) {
    for (const BrokerHit& hit : outcome.hits) all.push_back(&hit);
  }
  const auto better = [](const BrokerHit* a, const BrokerHit* b) {
    return a->score > b->score || (a->score == b->score && a->doc < b->doc);
  };
  const size_t keep = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), better);
  all.resize(keep);
  return all;
}

}  // namespace warp
