// zmq_rtt: the floor under the broker's overhead. One DEALER sends a small message to a ROUTER in
// another process over TCP loopback and waits for the echo, 20,000 times after 1,000 of warm-up:
// the mean round trip of one ZeroMQ request/reply (four thread hand-offs through both sides' I/O
// threads, no work). usage: zmq_rtt server | zmq_rtt client [tcp://127.0.0.1:5999]
#include <chrono>
#include <cstdio>
#include <string>
#include <zmq.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: zmq_rtt server|client [ENDPOINT]\n"), 2;
  const std::string endpoint = argc > 2 ? argv[2] : "tcp://127.0.0.1:5999";
  zmq::context_t context(1);
  if (std::string(argv[1]) == "server") {
    zmq::socket_t router(context, zmq::socket_type::router);
    router.bind(endpoint);
    for (;;) {
      zmq::message_t identity, empty, body;
      if (!router.recv(identity) || !router.recv(empty) || !router.recv(body)) continue;
      router.send(identity, zmq::send_flags::sndmore);
      router.send(empty, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
  }
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.connect(endpoint);
  const int warm_up = 1000, measured = 20000;
  double total_us = 0;
  for (int i = 0; i < warm_up + measured; ++i) {
    const auto start = std::chrono::steady_clock::now();
    dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
    dealer.send(zmq::str_buffer("a small leaf request"), zmq::send_flags::none);
    zmq::message_t empty, body;
    if (!dealer.recv(empty) || !dealer.recv(body)) return 1;
    if (i >= warm_up) total_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("zmq_rtt: mean round trip %.1f us over %d requests\n", total_us / measured, measured);
  return 0;
}
