// A small HTTP/1.1 server on Boost.Beast for the services' APIs, metrics and health endpoints:
// a fixed pool of threads, keep-alive, request size limits (an oversized header, URL or body gets
// 400 with a JSON error and the connection closed), and handlers that know nothing of sockets.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace warp::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as received
  std::string path;    // target without the query
  std::map<std::string, std::string> query;  // decoded query parameters (last one wins)
  std::string body;
  bool query_ok = true;  // false when the query string was malformed (bad percent-encoding)
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 8080;        // 0: any free port (see Server::port())
  size_t threads = 4;
  size_t max_header_bytes = 8192;
  size_t max_body_bytes = 65536;
};

class Server {
 public:
  Server(ServerOptions options, Handler handler);  // binds and starts; throws Error on failure
  ~Server();                                       // stops accepting, joins the threads
  uint16_t port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// "127.0.0.1:8080" → address and port; throws Error naming the flag on anything else.
std::pair<std::string, uint16_t> parse_host_port(const std::string& text, const std::string& flag);

// Percent-decoding of a query component ('+' is a space); false on a malformed escape.
bool url_decode(std::string_view in, std::string& out);

}  // namespace warp::http
