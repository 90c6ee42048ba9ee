// The leaf's direct search path: searches over TCP beside the ZeroMQ ROUTER, the same requests and
// replies (Cap'n Proto LeafRequest/LeafReply) in secure_channel.hpp's frames. Why it exists: a
// ZeroMQ message crosses two I/O-thread hops a side, and on the GPU machine a fan-out round trip
// costs 2.2-3x one over plain TCP at every concurrency (tests/bench/results/serving.md); status
// polls and generation transfers stay on ZeroMQ. With Curve on, a connection must first complete
// the Curve handshake with a broker key of the allow-list; one that fails is closed and counted in
// warpsearch_leaf_curve_refused_total. What strangers may take (connections, unauthenticated ones,
// handshakes a second) is bounded by DirectAdmission; an unfinished handshake has a deadline. The
// handshakes' key exchanges run on a thread of their own, never on a front end that answers searches.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <zmq.hpp>

#include "common/util/status.hpp"
#include "leaf/service/direct_peer.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

DirectPeer::~DirectPeer() { ::close(fd); }

void DirectPeer::write_frame(std::string_view body) {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (broken) return;
  std::string frame;
  transfer::append_stream_frame(frame, session ? session->seal(body) : std::string(body));
  send_locked(frame);
}

void DirectPeer::write_plain(std::string_view body) {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (broken) return;
  std::string frame;
  transfer::append_stream_frame(frame, body);
  send_locked(frame);
}

// A peer that cannot take a reply is shut down at once (its epoll loop then sees the hang-up and
// closes it) rather than left open and ignored.
void DirectPeer::mark_broken() {
  broken = true;
  ::shutdown(fd, SHUT_RDWR);
}

void DirectPeer::send_locked(const std::string& frame) {
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd out{fd, POLLOUT, 0};
      if (::poll(&out, 1, 1000) <= 0) return mark_broken();
    } else {
      return mark_broken();
    }
  }
}

void LeafServer::open_direct_listener() {
  const std::string& spec = options_.search_listen;
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos) throw Error("leaf: --search-listen takes HOST:PORT, not '" + spec + "'");
  std::string host = spec.substr(0, colon);
  const std::string port = spec.substr(colon + 1);
  if (host == "*") host.clear();
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    throw Error("leaf: --search-listen " + spec + ": " + gai_strerror(error));
  }
  std::string why = "no address";
  for (addrinfo* address = found; address != nullptr && tcp_listener_ < 0; address = address->ai_next) {
    const int fd = ::socket(address->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && ::bind(fd, address->ai_addr, address->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      tcp_listener_ = fd;
    } else {
      why = std::strerror(errno);
      if (fd >= 0) ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (tcp_listener_ < 0) throw Error("leaf: cannot listen on --search-listen " + spec + ": " + why);
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(tcp_listener_, reinterpret_cast<sockaddr*>(&bound), &size);
  search_port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  DirectAdmission::Limits limits = options_.direct_limits;
  limits.connections = std::min(limits.connections, direct_connection_budget());
  admission_ = std::make_unique<DirectAdmission>(limits, options_.curve.enabled());
  // Two steps for every connection that may be in its handshake at once.
  if (options_.curve.enabled())
    handshake_steps_ = std::make_unique<BoundedQueue<HandshakeStep>>(2 * limits.unauthenticated);
  for (size_t i = 0; i < std::max<size_t>(1, options_.search_threads); ++i)
    direct_pollers_.push_back(::epoll_create1(EPOLL_CLOEXEC));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;  // the listener: no peer
  ::epoll_ctl(direct_pollers_[0], EPOLL_CTL_ADD, tcp_listener_, &event);
}

void LeafServer::close_direct_path() {
  for (int poller : direct_pollers_) ::close(poller);
  if (tcp_listener_ >= 0) ::close(tcp_listener_);
  std::lock_guard<std::mutex> lock(direct_peers_mutex_);
  direct_peers_.clear();
}

// Front end `index` of --search-threads: each waits in an epoll of its own on the connections
// handed to it; the first also on the listener, and deals new connections out in turn (so that a
// broker's few connections, one per event loop, spread over the threads).
void LeafServer::direct_front_end(size_t index) {
  const int poller = direct_pollers_[index];
  std::vector<epoll_event> ready(64);
  std::vector<char> buffer(1 << 16);
  const auto drop = [&](DirectPeer* peer) {
    ::epoll_ctl(poller, EPOLL_CTL_DEL, peer->fd, nullptr);
    bool was_authenticated = false;
    {  // under the lock the handshake thread authenticates under: counted once, one way or the other
      std::lock_guard<std::mutex> lock(peer->write_mutex);
      peer->broken = true;  // a worker (or the handshake thread) still holding it writes nothing
      was_authenticated = peer->authenticated || !peer->secure;
    }
    admission_->closed(peer->source, was_authenticated);
    std::lock_guard<std::mutex> lock(direct_peers_mutex_);
    direct_peers_.erase(peer);  // the descriptor closes with its last holder
  };
  while (!stop_) {
    const int count = ::epoll_wait(poller, ready.data(), static_cast<int>(ready.size()), 100);
    if (index == 0) {  // the listener back after a pause for descriptors; handshakes past their deadline
      const auto now = std::chrono::steady_clock::now();
      if (accept_paused_ && now >= accept_paused_until_) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.ptr = nullptr;
        ::epoll_ctl(poller, EPOLL_CTL_ADD, tcp_listener_, &event);
        accept_paused_ = false;
      }
      if (now >= next_handshake_sweep_) {
        sweep_handshakes();
        next_handshake_sweep_ = now + std::chrono::milliseconds(100);
      }
    }
    for (int i = 0; i < count; ++i) {
      auto* const raw = static_cast<DirectPeer*>(ready[static_cast<size_t>(i)].data.ptr);
      if (raw == nullptr) {  // the listener
        accept_direct(poller);
        continue;
      }
      std::shared_ptr<DirectPeer> peer;
      {
        std::lock_guard<std::mutex> lock(direct_peers_mutex_);
        auto found = direct_peers_.find(raw);
        if (found == direct_peers_.end()) continue;
        peer = found->second;
      }
      const int fd = peer->fd;
      bool closed = false;
      for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n > 0) {
          peer->in.append(buffer.data(), static_cast<size_t>(n));
          if (static_cast<size_t>(n) < buffer.size()) break;
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else {
          closed = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
          break;
        }
      }
      size_t at = 0;
      try {
        while (!closed) {
          // Before the handshake is done nothing longer than its messages (kMaxHandshakeFrame,
          // 255 bytes) is read: a stranger cannot make the leaf hold a large frame for it.
          if (peer->secure && !peer->session && transfer::handshake_frame_too_long(peer->in, at)) {
            ++search_refused_;
            closed = true;
            break;
          }
          const auto body = transfer::next_stream_frame(peer->in, at);
          if (!body) break;
          if (peer->secure && !peer->authenticated.load(std::memory_order_acquire)) {
            // The HELLO, then the INITIATE, to the handshake thread in order; nothing more before
            // the READY (a client sends its first request after it), and HELLOs at most so many a
            // second (admission), each a queue push here.
            const bool hello = peer->handshake_frames++ == 0;
            if (peer->handshake_frames > 2 || peer->refused) {
              ++search_refused_;
              closed = true;
              break;
            }
            if ((hello && !admission_->handshake_allowed(peer->source, std::chrono::steady_clock::now())) ||
                !handshake_steps_->try_push({peer, std::string(*body)})) {
              direct_refused_.Add({{"reason", "handshake_rate"}}).Increment();
              closed = true;
              break;
            }
            continue;
          }
          if (peer->session) {
            std::optional<std::string> request = peer->session->open(*body);
            if (!request) {  // forged, altered or replayed: the connection is not to be trusted
              malformed_.Increment();
              closed = true;
              break;
            }
            on_direct_frame(peer, std::move(*request));
          } else {
            on_direct_frame(peer, std::string(*body));
          }
        }
      } catch (const std::exception&) {  // a frame length past the limit
        malformed_.Increment();
        closed = true;
      }
      peer->in.erase(0, at);
      if (closed) drop(peer.get());
    }
  }
}

// New connections, while the listener has them: each admitted (DirectAdmission) or closed at once.
// Out of descriptors, the listener leaves the epoll for 100 ms instead of waking it again at once
// (level-triggered, it had spun a core while the process could accept nothing).
void LeafServer::accept_direct(int poller) {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    const int connection =
        ::accept4(tcp_listener_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        ::epoll_ctl(poller, EPOLL_CTL_DEL, tcp_listener_, nullptr);
        accept_paused_ = true;
        accept_paused_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        direct_refused_.Add({{"reason", "descriptors"}}).Increment();
      }
      return;  // EAGAIN: none left
    }
    char text[INET6_ADDRSTRLEN] = "";
    if (address.ss_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr, text, sizeof text);
    } else if (address.ss_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, text, sizeof text);
    }
    const std::string source = text;
    if (const auto refusal = admission_->admit(source); refusal != DirectAdmission::Refusal::kNone) {
      ::close(connection);
      direct_refused_.Add({{"reason", std::string(DirectAdmission::name(refusal))}}).Increment();
      continue;
    }
    const int one = 1;
    ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto peer = std::make_shared<DirectPeer>(connection, options_.curve.enabled(), source);
    if (peer->secure) peer->handshake.emplace(options_.curve.own, options_.curve.allowed);
    epoll_event added{};
    added.events = EPOLLIN;
    added.data.ptr = peer.get();
    {
      std::lock_guard<std::mutex> lock(direct_peers_mutex_);
      direct_peers_.emplace(peer.get(), peer);
    }
    ::epoll_ctl(direct_pollers_[next_direct_poller_++ % direct_pollers_.size()], EPOLL_CTL_ADD, connection, &added);
  }
}

void LeafServer::handshake_thread() {
  while (auto step = handshake_steps_->pop()) handshake_step(std::move(*step));
}

// One HELLO or INITIATE. A refused one shuts the connection down; its front end then sees the
// hang-up and closes it.
void LeafServer::handshake_step(HandshakeStep step) {
  DirectPeer& peer = *step.peer;
  if (peer.refused || peer.timed_out || peer.authenticated) return;
  if (!peer.handshake->welcomed()) {
    if (const auto welcome = peer.handshake->hello(step.frame)) return peer.write_plain(*welcome);
  } else if (auto accepted = peer.handshake->initiate(step.frame)) {
    {
      std::lock_guard<std::mutex> lock(peer.write_mutex);
      if (peer.broken) return;  // closed meanwhile: its front end counted it as unauthenticated
      peer.session.emplace(std::move(accepted->session));
      peer.handshake.reset();
      peer.authenticated.store(true, std::memory_order_release);  // after the session: the front end reads it next
      admission_->authenticated(peer.source);
    }
    return peer.write_plain(accepted->ready);
  }
  refuse_handshake(peer);
}

void LeafServer::refuse_handshake(DirectPeer& peer) {
  if (peer.refused.exchange(true)) return;
  ++search_refused_;
  ::shutdown(peer.fd, SHUT_RDWR);
}

// Connections whose Curve handshake is not done within the handshake timeout are shut down; each
// one's front end then sees the hang-up and closes it.
void LeafServer::sweep_handshakes() {
  if (!options_.curve.enabled()) return;
  const auto deadline = std::chrono::steady_clock::now() - options_.handshake_timeout;
  std::lock_guard<std::mutex> lock(direct_peers_mutex_);
  for (const auto& [raw, peer] : direct_peers_) {
    if (peer->authenticated || peer->accepted > deadline || peer->timed_out.exchange(true)) continue;
    ::shutdown(peer->fd, SHUT_RDWR);
    direct_refused_.Add({{"reason", "handshake_timeout"}}).Increment();
  }
}

}  // namespace warp
