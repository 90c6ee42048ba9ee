#include "broker/direct_leaf_link.hpp"

#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <optional>

#include "common/transfer/secure_channel.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace asio = boost::asio;

struct DirectLeafLink::Connection {
  Connection(asio::io_context& io, std::string endpoint, std::string host, uint16_t port)
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

DirectLeafLink::DirectLeafLink(Events events, const Cluster& cluster, asio::io_context& io)
    : LeafLink(std::move(events)), cluster_(cluster), io_(io) {}

DirectLeafLink::~DirectLeafLink() = default;

void DirectLeafLink::follow(const std::vector<std::string>& endpoints) {
  for (auto it = links_.begin(); it != links_.end();) {
    it = std::find(endpoints.begin(), endpoints.end(), it->first) == endpoints.end() ? links_.erase(it) : std::next(it);
  }
}

bool DirectLeafLink::ready(const Replica& replica) {
  const uint16_t port = replica.search_port;
  if (port == 0) return false;
  auto& link = links_[replica.endpoint];
  if (!link || link->port != port) {
    // "tcp://HOST:PORT" (HOST an address, [an IPv6 address] or a name): the leaf's host, the
    // status's port.
    const std::string rest = replica.endpoint.substr(replica.endpoint.find("://") + 3);
    std::string host = rest.substr(0, rest.rfind(':'));
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    link = std::make_shared<Connection>(io_, replica.endpoint, std::move(host), port);
    connect(link);
  }
  return link->usable;
}

bool DirectLeafLink::send(const Replica& replica, std::string_view request) {
  auto found = links_.find(replica.endpoint);
  if (found == links_.end() || !found->second->usable) return false;
  const std::shared_ptr<Connection> held = found->second;  // alive through a failed write's retries
  std::string frame;
  transfer::append_stream_frame(frame, held->session ? held->session->seal(request) : std::string(request));
  write(held, std::move(frame));
  return held->usable;  // false: the write failed, and the connection is remade
}

// Connects to the link's host: at once to an address; to a name once resolved, trying each of
// its addresses in turn. A name that does not resolve fails like a refused connection (retried).
void DirectLeafLink::connect(const std::shared_ptr<Connection>& link) {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(link->host, ec);
  if (!ec) {
    link->socket.async_connect(
        asio::ip::tcp::endpoint(address, link->port),
        [this, weak = Weak(link)](boost::system::error_code ec) { connected(weak, ec.value()); });
    return;
  }
  link->resolver.async_resolve(
      link->host, std::to_string(link->port), asio::ip::resolver_base::numeric_service,
      [this, weak = Weak(link)](boost::system::error_code ec, asio::ip::tcp::resolver::results_type found) {
        auto link = weak.lock();
        if (!link || ec == asio::error::operation_aborted) return;
        if (ec) return failed(link, kResolveRetry);  // getaddrinfo at most once a second a link
        asio::async_connect(link->socket, found,
                            [this, weak](boost::system::error_code ec, const asio::ip::tcp::endpoint&) {
                              connected(weak, ec.value());
                            });
      });
}

void DirectLeafLink::connected(const Weak& weak, int error) {
  auto link = weak.lock();
  if (!link) return;
  if (error != 0) return failed(link);
  boost::system::error_code ignored;
  link->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  link->socket.non_blocking(true, ignored);
  link->in.clear();
  if (cluster_.curve().enabled()) {
    try {
      link->handshake.emplace(cluster_.curve().own, cluster_.leaf_key());
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

// The connection is closed and made again in a while; requests waiting on it are lost.
void DirectLeafLink::failed(const std::shared_ptr<Connection>& link, std::chrono::milliseconds retry) {
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
  link->reconnect.async_wait([this, weak = Weak(link)](boost::system::error_code ec) {
    auto link = weak.lock();
    if (ec || !link) return;
    auto current = links_.find(link->endpoint);
    if (current == links_.end() || current->second != link) return;
    connect(link);
  });
  if (was_usable) events_.on_lost(link->endpoint);
}

void DirectLeafLink::read(const std::shared_ptr<Connection>& link) {
  link->socket.async_read_some(
      asio::buffer(link->buffer), [this, weak = Weak(link)](boost::system::error_code ec, size_t n) {
        auto link = weak.lock();
        if (!link) return;
        if (ec) return failed(link);
        link->in.append(link->buffer.data(), n);
        size_t at = 0;
        try {
          for (;;) {
            // Until READY, nothing longer than a handshake message: a fake leaf cannot make the
            // broker hold a large frame for it.
            if (link->handshake && transfer::handshake_frame_too_long(link->in, at)) {
              throw Error("a frame longer than a handshake message before the handshake's end");
            }
            const auto body = transfer::next_stream_frame(link->in, at);
            if (!body) break;
            on_frame(link, *body);
            if (!link->socket.is_open()) return;  // a write failed: the connection is remade
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "warp-broker: direct search path to %s: %s\n", link->endpoint.c_str(), e.what());
          return failed(link);
        }
        link->in.erase(0, at);
        read(link);
      });
}

// The handshake's WELCOME and READY, then sealed (or, Curve off, plain) replies.
void DirectLeafLink::on_frame(const std::shared_ptr<Connection>& link, std::string_view body) {
  if (link->handshake && !link->handshake->welcomed()) {  // the WELCOME: the INITIATE goes back
    const std::optional<std::string> initiate = link->handshake->welcome(body);
    if (!initiate) throw Error("the leaf's WELCOME does not prove its Curve key");
    std::string frame;
    transfer::append_stream_frame(frame, *initiate);
    write(link, std::move(frame));
    return;
  }
  if (link->handshake) {  // the READY: the leaf took the INITIATE
    link->session = link->handshake->ready(body);
    link->handshake.reset();
    if (!link->session) throw Error("the leaf's READY does not open (the broker's key refused?)");
    link->usable = true;
    return;
  }
  std::optional<std::string> opened;
  if (link->session && !(opened = link->session->open(body))) throw Error("a reply that does not open");
  events_.on_reply(opened ? std::string_view(*opened) : body);
}

// Written at once where the socket takes it; else after what is being written, in order.
void DirectLeafLink::write(const std::shared_ptr<Connection>& link, std::string frame) {
  if (link->writing) {
    link->queued += frame;
    return;
  }
  boost::system::error_code ec;
  const size_t written = link->socket.write_some(asio::buffer(frame), ec);
  if (ec && ec != asio::error::would_block) return failed(link);
  if (written == frame.size()) return;
  link->out = frame.substr(written);
  flush(link);
}

// Writes `out` (untouched until done), then what was queued meanwhile.
void DirectLeafLink::flush(const std::shared_ptr<Connection>& link) {
  link->writing = true;
  asio::async_write(link->socket, asio::buffer(link->out),
                    [this, weak = Weak(link)](boost::system::error_code ec, size_t) {
                      auto link = weak.lock();
                      if (!link || ec == asio::error::operation_aborted) return;
                      link->writing = false;
                      if (ec) return failed(link);
                      link->out = std::move(link->queued);
                      link->queued.clear();
                      if (!link->out.empty()) flush(link);
                    });
}

}  // namespace warp
