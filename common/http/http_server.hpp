// The services' HTTP/1.1 server on Boost.Beast: asynchronous, so no connection holds a thread.
// A fixed number of I/O threads serve every connection; a request's header and body must arrive
// within `request_timeout` of its first byte, a keep-alive connection's next request must start
// within `idle_timeout`, or the connection is closed (a slow or idle client costs a socket, never a
// thread, and a trickled request no more than the request timeout). Beyond `max_connections` (or
// `max_connections_per_source` from one address) a new connection gets 503 with Retry-After and is
// closed. A request is admitted on its header (`admit`: the broker's tokens) before any of its body
// is read, and the bodies being read together stay within `max_body_bytes_in_flight` (past it, 503).
// Oversized headers, URLs or bodies get 400 with a JSON error. Handlers know nothing of sockets: a synchronous one
// returns its Response; an asynchronous one gets a Respond to call once, from any thread, so the
// I/O thread is free while the answer is being made (the broker's fan-out).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warp::http {

struct Request {
  std::string method;                             // "GET", "POST", ...
  std::string target;                             // path and query, as received
  std::string path;                               // target without the query
  std::multimap<std::string, std::string> query;  // decoded query parameters, repeats kept in order
  std::string authorization;                      // the Authorization header, "" when absent
  std::string body;
  bool query_ok = true;  // false when the query string was malformed (bad percent-encoding)
};

struct Response {
  Response() = default;
  Response(int status, std::string content_type, std::string body,
           std::vector<std::pair<std::string, std::string>> headers = {})
      : status(status), content_type(std::move(content_type)), body(std::move(body)), headers(std::move(headers)) {}
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Retry-After, WWW-Authenticate
};

using Handler = std::function<Response(const Request&)>;
using Respond = std::function<void(Response)>;  // call exactly once, from any thread
using AsyncHandler = std::function<void(const Request&, Respond)>;

// Called on a request's header (method, target, path, query and authorization set; no body yet):
// a Response refuses it, sent at once and the connection closed, its body never read.
using Admit = std::function<std::optional<Response>(const Request& head)>;

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see Server::port())
  size_t threads = 2;    // I/O threads (of the server's own pool)
  size_t max_header_bytes = 8192;
  size_t max_body_bytes = 65536;
  size_t max_connections = 10000;
  size_t max_connections_per_source = 0;  // open connections from one address (0: no limit)
  // Bytes of request bodies being read, all connections together: each request holds its declared
  // length (a chunked one max_body_bytes) from its header until it is answered (0: no limit).
  uint64_t max_body_bytes_in_flight = uint64_t{64} << 20;
  std::chrono::milliseconds request_timeout{10000};  // header and body of a request, from its first byte
  std::chrono::milliseconds idle_timeout{60000};     // for a keep-alive connection's next request to start
  Admit admit{};                                     // empty: every request is read whole
};

struct ServerStats {
  uint64_t connections_open = 0;     // now
  uint64_t connections_total = 0;    // accepted since start
  uint64_t connections_refused = 0;  // over max_connections or max_connections_per_source: 503
  uint64_t timeouts = 0;             // closed for a request or idle timeout
  uint64_t bodies_refused = 0;       // over max_body_bytes_in_flight: 503
  uint64_t refused_on_header = 0;    // refused by `admit` before their body
};

class IoPool;

class Server {
 public:
  // Binds and starts on `options.threads` I/O threads of its own, or on `shared_pool`'s (which
  // must outlive the server); throws Error on failure.
  Server(ServerOptions options, AsyncHandler handler);
  Server(ServerOptions options, AsyncHandler handler, IoPool* shared_pool);
  Server(ServerOptions options, Handler handler);  // a handler that answers at once
  ~Server();                                       // stops accepting and serving; answers given after this are dropped
  uint16_t port() const { return port_; }
  ServerStats stats() const;

  struct Impl;  // shared with the connections, which may outlive the Server (answers in flight)

 private:
  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// "127.0.0.1:8080" → address and port; throws Error naming the flag on anything else.
std::pair<std::string, uint16_t> parse_host_port(const std::string& text, const std::string& flag);

// Percent-decoding of a query component ('+' is a space); false on a malformed escape.
bool url_decode(std::string_view in, std::string& out);

// Splits a target into path and decoded query parameters (Request::path, query, query_ok).
void parse_target(Request& request);

}  // namespace warp::http
