#include "common/http/http_server.hpp"

#include <utility>  // before Boost.Asio with GCC 12 in C++20 (see docs/gpu.md)

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/http/io_pool.hpp"
#include "common/util/status.hpp"

namespace warp::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {
class Session;
}

// The I/O threads are an IoPool, the server's own or one shared with other work (the broker's
// fan-out); the acceptor lives on the first loop and deals connections out round-robin, so a
// connection's every step runs on one thread.
struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(std::shared_ptr<IoPool> owned_pool, IoPool& pool)
      : owned(std::move(owned_pool)), pool(pool), acceptor(pool.context(0)), accept_pause(pool.context(0)) {}
  std::shared_ptr<IoPool> owned;  // null when the pool is shared
  IoPool& pool;
  ServerOptions options;
  AsyncHandler handler;
  size_t next_io = 0;  // on the acceptor's thread only
  tcp::acceptor acceptor;
  asio::steady_timer accept_pause;
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> open{0}, total{0}, refused{0}, timeouts{0}, bodies_refused{0}, refused_on_header{0};
  std::atomic<uint64_t> body_bytes_in_flight{0};
  std::mutex sessions_mutex;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;  // to close them on stop
  std::unordered_map<std::string, size_t> per_source;             // open connections by address, under sessions_mutex

  // A connection from `source` takes a place; false (nothing taken) over the per-source limit.
  bool take_source(const std::string& source) {
    if (options.max_connections_per_source == 0) return true;
    std::lock_guard<std::mutex> lock(sessions_mutex);
    size_t& count = per_source[source];
    if (count >= options.max_connections_per_source) return false;
    ++count;
    return true;
  }
  void release_source(const std::string& source) {
    if (options.max_connections_per_source == 0) return;
    std::lock_guard<std::mutex> lock(sessions_mutex);
    auto it = per_source.find(source);
    if (it != per_source.end() && --it->second == 0) per_source.erase(it);
  }
  // A request's body of `bytes` joins those being read; false (nothing held) past the budget.
  bool hold_body(uint64_t bytes) {
    if (options.max_body_bytes_in_flight == 0 || bytes == 0) return true;
    uint64_t now = body_bytes_in_flight.load(std::memory_order_relaxed);
    do {
      if (now + bytes > options.max_body_bytes_in_flight) return false;
    } while (!body_bytes_in_flight.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    return true;
  }

  void accept();
  void refuse(tcp::socket socket);
};

namespace {

Response json_error(int status, const char* message) {
  return {status, "application/json", std::string(R"({"error":")") + message + "\"}", {}};
}

class Session;
// The connection whose handler runs on this thread (set around the call): an answer given inside
// the handler is written at once instead of being posted back to the connection's thread.
thread_local Session* answering_now = nullptr;

// One connection: read a request, hand it to the handler, write the answer, and again while the
// client keeps the connection alive. Every step runs on the connection's I/O thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `source`: the peer's address, whose place in the per-source count the session holds.
  Session(std::shared_ptr<Server::Impl> server, asio::io_context& io, tcp::socket socket, std::string source)
      : server_(std::move(server)), io_(io), stream_(std::move(socket)), source_(std::move(source)) {
    ++server_->open;
  }
  ~Session() {
    release_body();
    server_->release_source(source_);
    --server_->open;
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(server_->sessions_mutex);
      server_->sessions[this] = weak_from_this();
    }
    beast::error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
    read(/*kept_alive=*/false);
  }

  // From any thread: closes the connection (the server stops).
  void close_soon() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->stream_.close(); });
  }

 private:
  // The next request. On a kept-alive connection with nothing buffered, its first bytes may take
  // the idle timeout; from them on (and from the connection's start) the request has the request
  // timeout, one expiry for header and body: a client trickling bytes cannot hold it longer.
  void read(bool kept_alive) {
    admitted_.reset();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    if (!kept_alive || buffer_.size() > 0) return read_header();
    stream_.expires_after(server_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->on_read(ec, 0);
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    stream_.expires_after(server_->options.request_timeout);
    beast::http::async_read_header(stream_, buffer_, *parser_,
                                   beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // The request as its header gives it (no body): what `admit` and the handler see.
  Request head_of(const beast::http::request_parser<beast::http::string_body>::value_type& message) const {
    Request request;
    request.method =
        message.method() == beast::http::verb::head ? std::string("GET") : std::string(message.method_string());
    request.target = std::string(message.target());
    if (auto it = message.find(beast::http::field::authorization); it != message.end()) {
      request.authorization = std::string(it->value());
    }
    parse_target(request);
    return request;
  }

  // Refuses the request on its header: the answer at once, the connection closed, the body unread.
  void refuse(Response response) {
    keep_alive_ = false;
    head_ = false;
    write(std::move(response));
  }

  void release_body() {
    if (body_held_ == 0) return;
    server_->body_bytes_in_flight.fetch_sub(body_held_, std::memory_order_relaxed);
    body_held_ = 0;
  }

  // The header is in. A client that sent "Expect: 100-continue" waits for a 100 before its body
  // (curl, a second, then sends it anyway; others for good): it gets one, or at once the 400 its
  // declared body's size earns. Then the body, within the same expiry.
  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read(ec, 0);
    const auto& header = parser_->get();
    // RFC 9112 §6.3: a request whose Transfer-Encoding is anything but exactly "chunked" has no
    // length a server can trust (identity, gzip, "chunked, identity" ...): a body read some other
    // way could be a second request smuggled behind this one. 400, and the connection closed.
    if (const auto coding = header.find(beast::http::field::transfer_encoding); coding != header.end()) {
      beast::string_view value = coding->value();
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
      if (!beast::iequals(value, "chunked")) {
        return refuse(json_error(400, "unsupported Transfer-Encoding: only chunked is accepted"));
      }
    }
    // Admitted on its header (the broker's tokens), before a byte of its body is read or held.
    if (server_->options.admit) {
      admitted_ = head_of(header);  // kept for the handler: the target is parsed once
      if (std::optional<Response> refusal = server_->options.admit(*admitted_)) {
        ++server_->refused_on_header;
        return refuse(std::move(*refusal));
      }
    }
    if (parser_->is_done()) return on_read(ec, 0);
    // Its body's room among the bodies being read: the declared length, or the limit (chunked).
    if (parser_->content_length() && *parser_->content_length() > server_->options.max_body_bytes) {
      return on_read(beast::http::error::body_limit, 0);
    }
    const uint64_t room = parser_->content_length() ? *parser_->content_length() : server_->options.max_body_bytes;
    if (!server_->hold_body(room)) {
      ++server_->bodies_refused;
      return refuse({503,
                     "application/json",
                     R"({"error":"too many request bodies in progress, retry"})",
                     {{"Retry-After", "1"}}});
    }
    body_held_ = room;
    const auto expect = header.find(beast::http::field::expect);
    if (expect == header.end() || !beast::iequals(expect->value(), "100-continue")) return read_body();
    if (parser_->content_length() && *parser_->content_length() > server_->options.max_body_bytes) {
      return on_read(beast::http::error::body_limit, 0);
    }
    auto interim = std::make_shared<beast::http::response<beast::http::empty_body>>(beast::http::status::continue_, 11);
    beast::http::async_write(stream_, *interim, [self = shared_from_this(), interim](beast::error_code ec, size_t) {
      if (ec) return self->on_read(ec, 0);
      self->read_body();
    });
  }

  void read_body() {
    beast::http::async_read(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == beast::error::timeout) {
      ++server_->timeouts;
      return shutdown();
    }
    if (ec == beast::http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      return shutdown();
    }
    keep_alive_ = false;
    head_ = false;
    if (ec == beast::http::error::body_limit) return write(json_error(400, "request body too large"));
    if (ec == beast::http::error::header_limit) return write(json_error(400, "request header or URL too large"));
    if (ec) {
      if (ec.category() != beast::http::make_error_code(beast::http::error::bad_target).category()) {
        return shutdown();  // a socket error: nobody to answer
      }
      return write(json_error(400, "malformed HTTP request"));  // a parse error
    }
    const auto& message = parser_->get();
    keep_alive_ = message.keep_alive();
    // HEAD is GET without the body (RFC 9110 §9.3.2): the handler answers a GET, write() sends
    // the head alone, with the Content-Length of what a GET would have got.
    head_ = message.method() == beast::http::verb::head;
    Request request = admitted_ ? std::move(*admitted_) : head_of(message);
    admitted_.reset();
    request.body = message.body();
    release_body();           // read: it is the handler's now
    stream_.expires_never();  // nothing is read while the handler works
    // Exactly once, from any thread, back onto this connection's thread.
    auto answered = std::make_shared<std::atomic<bool>>(false);
    Respond respond = [self = shared_from_this(), answered](Response response) {
      if (answered->exchange(true) || self->server_->stopped) return;
      if (answering_now == self.get() || self->io_.get_executor().running_in_this_thread()) {
        self->write(std::move(response));  // already on this connection's thread
        return;
      }
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response)]() mutable { self->write(std::move(response)); });
    };
    answering_now = this;
    try {
      server_->handler(request, respond);
    } catch (const std::exception&) {
      respond(json_error(500, "internal error"));
    }
    answering_now = nullptr;
  }

  void write(Response response) {
    auto out = std::make_shared<beast::http::response<beast::http::string_body>>(
        static_cast<beast::http::status>(response.status), 11);
    out->set(beast::http::field::content_type, response.content_type);
    out->set(beast::http::field::server, "warpsearch");
    for (const auto& [name, value] : response.headers) out->set(name, value);
    out->keep_alive(keep_alive_);
    stream_.expires_after(server_->options.request_timeout);  // a client that does not read its answer
    if (head_) {
      beast::http::response<beast::http::empty_body> head(std::move(out->base()));
      head.content_length(response.body.size());
      return send(std::make_shared<beast::http::response<beast::http::empty_body>>(std::move(head)));
    }
    out->body() = std::move(response.body);
    out->prepare_payload();
    send(std::move(out));
  }

  template <class Message>
  void send(std::shared_ptr<Message> out) {
    beast::http::async_write(stream_, *out, [self = shared_from_this(), out](beast::error_code ec, size_t) {
      if (ec == beast::error::timeout) ++self->server_->timeouts;
      if (ec || out->need_eof()) return self->shutdown();
      self->read(/*kept_alive=*/true);
    });
  }

  void shutdown() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
    std::lock_guard<std::mutex> lock(server_->sessions_mutex);
    server_->sessions.erase(this);
  }

  std::shared_ptr<Server::Impl> server_;
  asio::io_context& io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<beast::http::request_parser<beast::http::string_body>> parser_;
  std::string source_;
  std::optional<Request> admitted_;  // the request's head as `admit` saw it, until the handler gets it
  uint64_t body_held_ = 0;           // this request's room among the bodies in flight
  bool keep_alive_ = false;
  bool head_ = false;  // the request being answered is a HEAD
};

// The answer to a connection over the limit: 503 with Retry-After, then closed.
void refuse_connection(tcp::socket socket) {
  struct Refusal {
    beast::tcp_stream stream;
    std::string text =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        "Connection: close\r\nContent-Length: 40\r\n\r\n{\"error\":\"too many connections, retry\"}\n";
  };
  auto refusal = std::make_shared<Refusal>(Refusal{beast::tcp_stream(std::move(socket))});
  refusal->stream.expires_after(std::chrono::seconds(1));
  refusal->stream.async_write_some(asio::buffer(refusal->text), [refusal](beast::error_code, size_t) {
    beast::error_code ec;
    refusal->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    refusal->stream.close();
  });
}

}  // namespace

void Server::Impl::accept() {
  asio::io_context& io = pool.context(next_io++ % pool.size());
  acceptor.async_accept(io, [self = shared_from_this(), &io](beast::error_code ec, tcp::socket socket) {
    if (self->stopped) return;
    if (ec) {
      // Out of descriptors, say: pause instead of spinning, then accept again.
      self->accept_pause.expires_after(std::chrono::milliseconds(50));
      self->accept_pause.async_wait([self](beast::error_code) {
        if (!self->stopped) self->accept();
      });
      return;
    }
    beast::error_code peer_error;
    const tcp::endpoint peer = socket.remote_endpoint(peer_error);
    std::string source = peer_error ? std::string() : peer.address().to_string();
    if (self->open >= self->options.max_connections || !self->take_source(source)) {
      ++self->refused;
      refuse_connection(std::move(socket));
    } else {
      ++self->total;
      std::make_shared<Session>(self, io, std::move(socket), std::move(source))->start();
    }
    self->accept();
  });
}

Server::Server(ServerOptions options, AsyncHandler handler) : Server(std::move(options), std::move(handler), nullptr) {}

Server::Server(ServerOptions options, AsyncHandler handler, IoPool* shared_pool) {
  std::shared_ptr<IoPool> owned;
  if (shared_pool == nullptr) owned = std::make_shared<IoPool>(std::max<size_t>(1, options.threads));
  IoPool& pool = shared_pool != nullptr ? *shared_pool : *owned;
  impl_ = std::make_shared<Impl>(std::move(owned), pool);
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  try {
    const tcp::endpoint endpoint(asio::ip::make_address(impl_->options.address), impl_->options.port);
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& e) {
    throw Error("http: cannot listen on " + impl_->options.address + ":" + std::to_string(impl_->options.port) + ": " +
                e.what());
  }
  port_ = impl_->acceptor.local_endpoint().port();
  asio::post(pool.context(0), [impl = impl_] { impl->accept(); });
}

Server::Server(ServerOptions options, Handler handler)
    : Server(std::move(options),
             [handler = std::move(handler)](const Request& request, Respond respond) { respond(handler(request)); }) {}

Server::~Server() {
  impl_->stopped = true;
  asio::post(impl_->pool.context(0), [impl = impl_] {
    beast::error_code ec;
    impl->acceptor.close(ec);
    impl->accept_pause.cancel();
  });
  {
    std::lock_guard<std::mutex> lock(impl_->sessions_mutex);
    for (auto& entry : impl_->sessions) {
      if (auto session = entry.second.lock()) session->close_soon();
    }
  }
  // Connections close on their threads; then the threads stop.
  for (int i = 0; i < 200 && impl_->open > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (impl_->owned) impl_->owned->stop();  // a shared pool stops with its owner
}

ServerStats Server::stats() const {
  return {impl_->open.load(),     impl_->total.load(),          impl_->refused.load(),
          impl_->timeouts.load(), impl_->bodies_refused.load(), impl_->refused_on_header.load()};
}

}  // namespace warp::http
