// zmq_rtt: the floor under the broker's overhead. A DEALER sends a small message to a ROUTER in
// another process over TCP loopback and waits for the echo, 20,000 times after 1,000 of warm-up:
// the mean round trip of one ZeroMQ request/reply (four thread hand-offs through both sides' I/O
// threads, no work). With several endpoints each request goes to every one of them and the round
// trip ends with the last echo (the broker's fan-out to its partitions); with --clients N, N threads
// do so at once, each with sockets of its own, as the broker's loops do under N connections: the
// same path as the broker's transport stage with no broker and no leaf work on it.
// usage: zmq_rtt server [ENDPOINT] | zmq_rtt client [ENDPOINT...] [--clients N] [--io-threads K]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: zmq_rtt server [ENDPOINT] | client [ENDPOINT...] [--clients N] [--io-threads K]\n"), 2;
  std::vector<std::string> endpoints;
  int clients = 1, io_threads = 1;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--clients" && i + 1 < argc) {
      clients = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--io-threads" && i + 1 < argc) {
      io_threads = std::max(1, std::stoi(argv[++i]));
    } else {
      endpoints.push_back(arg);
    }
  }
  if (endpoints.empty()) endpoints.push_back("tcp://127.0.0.1:5999");
  zmq::context_t context(io_threads);
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
      std::vector<zmq::socket_t> dealers;
      for (const std::string& endpoint : endpoints) {
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
        if (i >= warm_up) total_us[static_cast<size_t>(c)] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed) return 1;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count();
  double sum = 0;
  for (double t : total_us) sum += t;
  std::printf("zmq_rtt: mean round trip %.1f us over %d requests x %d client(s) to %zu endpoint(s), %.0f round trips/s\n",
              sum / (static_cast<double>(measured) * clients), measured, clients, endpoints.size(),
              static_cast<double>(warm_up + measured) * clients / seconds);
  return 0;
}
