// zmq_rtt: the floor under the broker's overhead. A DEALER sends a small message to a ROUTER in
// another process over TCP loopback and waits for the echo, 20,000 times after 1,000 of warm-up:
// the mean round trip of one ZeroMQ request/reply (four thread hand-offs through both sides' I/O
// threads, no work). With several endpoints each request goes to every one of them and the round
// trip ends with the last echo (the broker's fan-out to its partitions); with --clients N, N threads
// do so at once, each with sockets of its own, as the broker's loops do under N connections: the
// same path as the broker's transport stage with no broker and no leaf work on it.
// With --raw the same exchange runs over plain TCP sockets instead: the client thread writes and
// reads its sockets itself, and the server is one thread waiting in epoll on every connection and
// echoing each length-prefixed message (the leaf's single front end, without ZeroMQ's I/O threads).
// What ZeroMQ costs above the kernel's own loopback: its two thread hops a side for every message.
// With --fan F each client sends to F of the endpoints (see endpoints_of), so that the servers,
// each one thread, are not what limits many clients.
// usage: zmq_rtt server [ENDPOINT] [--raw]
//        zmq_rtt client [ENDPOINT...] [--clients N] [--fan F] [--io-threads K] [--raw]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace {

// "tcp://HOST:PORT" as a socket address (IPv4).
sockaddr_in parse_endpoint(const std::string& endpoint) {
  const std::string rest = endpoint.substr(endpoint.find("://") == std::string::npos ? 0 : endpoint.find("://") + 3);
  const size_t colon = rest.rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(rest.substr(colon + 1))));
  const std::string host = rest.substr(0, colon);
  if (inet_pton(AF_INET, host == "*" ? "0.0.0.0" : host.c_str(), &address.sin_addr) != 1)
    throw std::runtime_error("bad endpoint " + endpoint);
  return address;
}

void no_delay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Reads or writes exactly `size` bytes; false when the peer closed or failed.
bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n <= 0) return false;
    data += n, size -= static_cast<size_t>(n);
  }
  return true;
}
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0) return false;
    data += n, size -= static_cast<size_t>(n);
  }
  return true;
}

// One thread, epoll over the listener and every connection; each readable connection's message
// (a 4-byte length, then the bytes) is read and written back before the next event.
[[noreturn]] void raw_server(const std::string& endpoint) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in address = parse_endpoint(endpoint);
  if (bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1024) != 0) {
    std::perror("zmq_rtt --raw server");
    std::exit(1);
  }
  const int poller = epoll_create1(0);
  epoll_event event{EPOLLIN, {.fd = listener}};
  epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
  std::vector<epoll_event> ready(256);
  std::vector<char> buffer(1 << 16);
  for (;;) {
    const int count = epoll_wait(poller, ready.data(), static_cast<int>(ready.size()), -1);
    for (int i = 0; i < count; ++i) {
      const int fd = ready[static_cast<size_t>(i)].data.fd;
      if (fd == listener) {
        const int connection = accept(listener, nullptr, nullptr);
        if (connection < 0) continue;
        no_delay(connection);
        epoll_event added{EPOLLIN, {.fd = connection}};
        epoll_ctl(poller, EPOLL_CTL_ADD, connection, &added);
        continue;
      }
      uint32_t size = 0;
      if (!read_all(fd, reinterpret_cast<char*>(&size), 4) || size > buffer.size() ||
          !read_all(fd, buffer.data(), size) || !write_all(fd, reinterpret_cast<const char*>(&size), 4) ||
          !write_all(fd, buffer.data(), size)) {
        epoll_ctl(poller, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
      }
    }
  }
}

// The endpoints client `c` fans out to: all of them, or with --fan F the F consecutive ones from
// c × F on (round the list), so that clients spread over more servers than a request visits (the
// broker choosing among a partition's replicas).
std::vector<std::string> endpoints_of(const std::vector<std::string>& all, int fan, int c) {
  if (fan == 0 || fan >= static_cast<int>(all.size())) return all;
  std::vector<std::string> mine;
  for (int j = 0; j < fan; ++j) mine.push_back(all[static_cast<size_t>(c * fan + j) % all.size()]);
  return mine;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    return std::fprintf(stderr,
                        "usage: zmq_rtt server [ENDPOINT] [--raw] | client [ENDPOINT...] [--clients N] [--fan F] "
                        "[--io-threads K] [--raw]\n"),
           2;
  std::vector<std::string> endpoints;
  int clients = 1, io_threads = 1, fan = 0;
  bool raw = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--clients" && i + 1 < argc) {
      clients = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--fan" && i + 1 < argc) {
      fan = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--raw") {
      raw = true;
    } else if (arg == "--io-threads" && i + 1 < argc) {
      io_threads = std::max(1, std::stoi(argv[++i]));
    } else {
      endpoints.push_back(arg);
    }
  }
  if (endpoints.empty()) endpoints.push_back("tcp://127.0.0.1:5999");
  if (raw && std::string(argv[1]) == "server") raw_server(endpoints[0]);
  zmq::context_t context(raw ? 1 : io_threads);
  if (std::string(argv[1]) == "server") {
    zmq::socket_t router(context, zmq::socket_type::router);
    router.bind(endpoints[0]);
    for (;;) {
      zmq::message_t identity, empty, body;
      if (!router.recv(identity) || !router.recv(empty) || !router.recv(body)) continue;
      router.send(identity, zmq::send_flags::sndmore);
      router.send(empty, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
  }
  const int warm_up = 1000, measured = 20000;
  std::atomic<bool> failed{false};
  std::vector<double> total_us(static_cast<size_t>(clients), 0);
  const auto start_all = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const std::vector<std::string> mine = endpoints_of(endpoints, fan, c);
      if (raw) {
        std::vector<int> sockets;
        for (const std::string& endpoint : mine) {
          sockets.push_back(socket(AF_INET, SOCK_STREAM, 0));
          const sockaddr_in address = parse_endpoint(endpoint);
          if (connect(sockets.back(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
            return void(failed = true);
          no_delay(sockets.back());
        }
        const std::string request = "a small leaf request";
        std::string message(4 + request.size(), '\0');
        const uint32_t size = static_cast<uint32_t>(request.size());
        std::copy_n(reinterpret_cast<const char*>(&size), 4, message.data());
        std::copy(request.begin(), request.end(), message.begin() + 4);
        std::string echo(message.size(), '\0');
        for (int i = 0; i < warm_up + measured; ++i) {
          const auto start = std::chrono::steady_clock::now();
          for (int fd : sockets) {
            if (!write_all(fd, message.data(), message.size())) return void(failed = true);
          }
          for (int fd : sockets) {
            if (!read_all(fd, echo.data(), echo.size()) || echo != message) return void(failed = true);
          }
          if (i >= warm_up)
            total_us[static_cast<size_t>(c)] +=
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        }
        for (int fd : sockets) close(fd);
        return;
      }
      std::vector<zmq::socket_t> dealers;
      for (const std::string& endpoint : mine) {
        dealers.emplace_back(context, zmq::socket_type::dealer);
        dealers.back().connect(endpoint);
      }
      for (int i = 0; i < warm_up + measured; ++i) {
        const auto start = std::chrono::steady_clock::now();
        for (zmq::socket_t& dealer : dealers) {
          dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
          dealer.send(zmq::str_buffer("a small leaf request"), zmq::send_flags::none);
        }
        for (zmq::socket_t& dealer : dealers) {
          zmq::message_t empty, body;
          if (!dealer.recv(empty) || !dealer.recv(body)) return void(failed = true);
        }
        if (i >= warm_up)
          total_us[static_cast<size_t>(c)] +=
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed) return 1;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count();
  double sum = 0;
  for (double t : total_us) sum += t;
  const size_t per_request = endpoints_of(endpoints, fan, 0).size();
  std::printf(
      "zmq_rtt%s: mean round trip %.1f us over %d requests x %d client(s) to %zu of %zu endpoint(s), %.0f round "
      "trips/s\n",
      raw ? " --raw" : "", sum / (static_cast<double>(measured) * clients), measured, clients, per_request,
      endpoints.size(), static_cast<double>(warm_up + measured) * clients / seconds);
  return 0;
}
