#include "common/http/http_server.hpp"

#include <utility>  // before Boost.Asio with GCC 12 in C++20 (see ../shared/GPU.md)

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>

#include <sys/socket.h>
#include <sys/time.h>

#include "common/util/status.hpp"

namespace warp::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

std::pair<std::string, uint16_t> parse_host_port(const std::string& text, const std::string& flag) {
  const size_t colon = text.rfind(':');
  unsigned long port = 0;
  try {
    if (colon == std::string::npos || colon == 0) throw Error("");
    size_t used = 0;
    port = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port > 65535) throw Error("");
  } catch (...) {
    throw Error(flag + " expects HOST:PORT, got '" + text + "'");
  }
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

namespace {

Request to_request(const beast::http::request<beast::http::string_body>& message) {
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.body = message.body();
  const size_t question = request.target.find('?');
  request.path = request.target.substr(0, question);
  if (question == std::string::npos) return request;
  std::string_view query = std::string_view(request.target).substr(question + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!url_decode(pair.substr(0, eq), key) || (eq != std::string_view::npos && !url_decode(pair.substr(eq + 1), value))) {
      request.query_ok = false;
    } else if (!key.empty()) {
      request.query[key] = value;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return request;
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::atomic<bool> stopping{false};
  std::thread accept_thread;
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<tcp::socket> pending;
  std::set<int> active;  // native handles of connections being served, shut down on stop

  void serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    for (;;) {
      beast::http::request_parser<beast::http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(options.max_body_bytes);
      beast::http::read(socket, buffer, parser, ec);
      if (ec == beast::http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) return;
      Response response;
      bool keep_alive = false;
      if (ec == beast::http::error::body_limit) {
        response = {400, "application/json", R"({"error":"request body too large"})"};
      } else if (ec == beast::http::error::header_limit) {
        response = {400, "application/json", R"({"error":"request header or URL too large"})"};
      } else if (ec) {
        response = {400, "application/json", R"({"error":"malformed HTTP request"})"};
      } else {
        const auto& message = parser.get();
        keep_alive = message.keep_alive();
        try {
          response = handler(to_request(message));
        } catch (const std::exception&) {
          response = {500, "application/json", std::string(R"({"error":"internal error"})")};
        }
      }
      beast::http::response<beast::http::string_body> out{static_cast<beast::http::status>(response.status), 11};
      out.set(beast::http::field::content_type, response.content_type);
      out.set(beast::http::field::server, "warpsearch");
      out.keep_alive(keep_alive);
      out.body() = std::move(response.body);
      out.prepare_payload();
      beast::http::write(socket, out, ec);
      if (ec || !keep_alive) {
        socket.shutdown(tcp::socket::shutdown_send, ec);
        return;
      }
    }
  }
};

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  try {
    const tcp::endpoint endpoint(asio::ip::make_address(impl_->options.address), impl_->options.port);
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen();
  } catch (const std::exception& e) {
    throw Error("http: cannot listen on " + impl_->options.address + ":" + std::to_string(impl_->options.port) + ": " + e.what());
  }
  port_ = impl_->acceptor.local_endpoint().port();
  Impl* impl = impl_.get();
  for (size_t i = 0; i < std::max<size_t>(1, impl->options.threads); ++i) {
    impl->workers.emplace_back([impl] {
      for (;;) {
        std::unique_lock<std::mutex> lock(impl->mutex);
        impl->ready.wait(lock, [&] { return impl->stopping || !impl->pending.empty(); });
        if (impl->pending.empty()) return;
        tcp::socket socket = std::move(impl->pending.front());
        impl->pending.pop_front();
        const int handle = socket.native_handle();
        impl->active.insert(handle);
        lock.unlock();
        // An idle keep-alive connection gives its thread back after 10 s.
        timeval idle{10, 0};
        ::setsockopt(handle, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
        impl->serve(std::move(socket));
        lock.lock();
        impl->active.erase(handle);
      }
    });
  }
  impl->accept_thread = std::thread([impl] {
    while (!impl->stopping) {
      beast::error_code ec;
      tcp::socket socket(impl->io);
      impl->acceptor.accept(socket, ec);
      if (ec) continue;
      std::lock_guard<std::mutex> lock(impl->mutex);
      impl->pending.push_back(std::move(socket));
      impl->ready.notify_one();
    }
  });
}

Server::~Server() {
  impl_->stopping = true;
  beast::error_code ec;
  // Wake the blocking accept with a connection of our own, then close.
  try {
    asio::io_context io;
    tcp::socket poke(io);
    poke.connect(tcp::endpoint(asio::ip::make_address(impl_->options.address == "0.0.0.0" ? "127.0.0.1" : impl_->options.address), port_), ec);
  } catch (...) {
  }
  impl_->accept_thread.join();
  impl_->acceptor.close(ec);
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (int handle : impl_->active) ::shutdown(handle, SHUT_RDWR);  // wake blocked reads
    impl_->ready.notify_all();
  }
  for (auto& worker : impl_->workers) worker.join();
}

}  // namespace warp::http
