// http_load: a closed-loop HTTP/1.1 load generator for the broker (no wrk needed, so it runs on the
// GPU machine too). `--connections` keep-alive connections, one thread each, send request targets
// from a file (each once, in order, shared by all connections: uncached queries) or one target
// again and again (cached), or queries of 1-4 words drawn at random from a word list (uncached
// with high probability); `--idle` more connections are opened first and left idle for the whole
// run. A request unanswered after 5 s counts as an error (and the connection is made again). Prints one Markdown row: connections,
// idle connections, answers, q/s, latency p50/p90/p99/max in ms, answers other than 200, errors.
//
//   http_load --address 127.0.0.1:8080 (--targets FILE | --target /search?q=x | --words FILE)
//             [--connections 16] [--seconds 10] [--idle 0] [--label TEXT]
#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "common/http/http_server.hpp"
#include "common/util/flags.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Tally {
  std::vector<double> latency_ms;
  uint64_t not_ok = 0, errors = 0;
};

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

int run(int argc, char** argv) {
  warp::Flags flags("usage: http_load --address HOST:PORT (--targets FILE | --target PATH) [flags]");
  flags.value("address", "127.0.0.1:8080", "the server")
      .value("targets", "", "request targets, one per line, each sent once (uncached queries)")
      .value("target", "", "one request target sent again and again (cached queries)")
      .value("words", "", "a word list: each request is /search?k=10&q= 1-4 random words of it")
      .value("connections", "16", "keep-alive connections sending, one thread each")
      .value("seconds", "10", "how long to send")
      .value("idle", "0", "connections opened first and left idle for the whole run")
      .value("label", "", "first column of the printed row");
  flags.parse(argc, argv);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  const auto [host, port] = warp::http::parse_host_port(flags.get("address"), "--address");
  std::vector<std::string> targets;
  if (!flags.get("targets").empty()) {
    std::ifstream in(flags.get("targets"));
    if (!in) throw warp::Error("cannot read " + flags.get("targets"));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) targets.push_back(line);
    }
  } else if (!flags.get("target").empty()) {
    targets.push_back(flags.get("target"));
  }
  std::vector<std::string> words;
  if (!flags.get("words").empty()) {
    std::ifstream in(flags.get("words"));
    if (!in) throw warp::Error("cannot read " + flags.get("words"));
    for (std::string word; in >> word;) words.push_back(word);
    if (words.empty()) throw warp::Error("no words in " + flags.get("words"));
  } else if (targets.empty()) {
    throw warp::Error("one of --targets, --target or --words is required");
  }
  const bool repeat = flags.get("targets").empty();
  asio::io_context io;
  const auto endpoints = tcp::resolver(io).resolve(host, std::to_string(port));

  std::vector<tcp::socket> idle;
  for (uint64_t i = 0; i < flags.count("idle"); ++i) {
    idle.emplace_back(io);
    asio::connect(idle.back(), endpoints);
  }

  const size_t connections = std::max<uint64_t>(1, flags.count("connections"));
  std::vector<Tally> tallies(connections);
  std::atomic<size_t> next{0};
  const auto end = Clock::now() + std::chrono::seconds(flags.count("seconds"));
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      asio::io_context local;
      beast::tcp_stream stream(local);
      beast::error_code ec;
      const auto connect = [&] {
        stream.expires_after(std::chrono::seconds(5));
        stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
        local.run();
        local.restart();
      };
      connect();
      beast::flat_buffer buffer;
      Tally& tally = tallies[c];
      std::mt19937_64 rng(c * 7919 + 17);
      while (Clock::now() < end) {
        const size_t i = next++;
        std::string target;
        if (!words.empty()) {
          target = "/search?k=10&q=";
          const int n = std::uniform_int_distribution<int>(1, 4)(rng);
          for (int w = 0; w < n; ++w) target += (w ? "+" : "") + words[rng() % words.size()];
        } else {
          if (!repeat && i >= targets.size()) break;
          target = targets[repeat ? 0 : i];
        }
        beast::http::request<beast::http::empty_body> request{beast::http::verb::get, target, 11};
        request.set(beast::http::field::host, host);
        request.keep_alive(true);
        beast::http::response<beast::http::string_body> response;
        const auto sent = Clock::now();
        // A request and its answer within 5 s (asynchronous calls: synchronous ones ignore timers).
        if (!ec) {
          stream.expires_after(std::chrono::seconds(5));
          beast::http::async_write(stream, request, [&](beast::error_code e, size_t) {
            ec = e;
            if (!e) beast::http::async_read(stream, buffer, response, [&](beast::error_code e2, size_t) { ec = e2; });
          });
          local.run();
          local.restart();
        }
        if (ec) {
          ++tally.errors;
          stream.close();
          buffer.clear();
          ec = {};
          connect();
          continue;
        }
        tally.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        if (response.result_int() != 200) ++tally.not_ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Tally all;
  for (Tally& tally : tallies) {
    all.latency_ms.insert(all.latency_ms.end(), tally.latency_ms.begin(), tally.latency_ms.end());
    all.not_ok += tally.not_ok;
    all.errors += tally.errors;
  }
  const size_t answered = all.latency_ms.size();
  const double max = answered == 0 ? 0 : *std::max_element(all.latency_ms.begin(), all.latency_ms.end());
  std::printf("| %s | %zu | %zu | %zu | %.0f | %.3f | %.3f | %.3f | %.3f | %llu | %llu |\n", flags.get("label").c_str(),
              connections, idle.size(), answered, answered / seconds, percentile(all.latency_ms, 50),
              percentile(all.latency_ms, 90), percentile(all.latency_ms, 99), max,
              static_cast<unsigned long long>(all.not_ok), static_cast<unsigned long long>(all.errors));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return warp::run_main("http_load", [&] { return run(argc, argv); });
}
