// http_load: a closed-loop HTTP/1.1 load generator for the broker (no wrk needed, so it runs on the
// GPU machine too). `--connections` keep-alive connections, each a chain of asynchronous calls,
// spread over `--threads` event loops (as wrk does: a thread per connection would put the load
// generator's own wake-ups, 64 threads on 16 cores, into the latencies it measures). Request
// targets come from a file (each once, in order, shared by all connections: uncached queries), or
// one target again and again (cached), or queries of 1-4 words drawn at random from a word list
// (each connection's words follow a fixed seed, so two runs repeat each other's queries and a
// one-word query recurs within a run: answered from the broker's result cache; with `--distinct`
// each query also holds a term of its own that no document has, and none is); `--idle` more
// connections are opened first and left idle for the whole run. A request unanswered after 5 s counts as an error (and
// the connection is made again). Latency runs from just before a request is written to its answer's last byte. Prints
// one Markdown row: connections, idle connections, answers, q/s, latency p50/p90/p99/max in ms, answers other than 200,
// errors.
//
//   http_load --address 127.0.0.1:8080 (--targets FILE | --target /search?q=x | --words FILE [--distinct])
//             [--connections 16] [--threads N] [--seconds 10] [--idle 0] [--label TEXT]
#include <utility>  // before Boost.Asio with GCC 12 in C++20

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
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

// What every connection reads while the load runs.
struct Load {
  std::string host;
  tcp::resolver::results_type endpoints;
  std::vector<std::string> targets;  // sent in order once each, or targets[0] again and again
  bool repeat = false;
  std::vector<std::string> words;  // if not empty: 1-4 random words a request instead
  std::string distinct;            // if not empty: each such query also holds the term distinct + a number of its own
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request (--header)
  Clock::time_point end;
  std::atomic<size_t> next{0};
};

// One keep-alive connection: connect, then write a request, read its answer, record, again, until
// the load's end; an error or 5 s without an answer counts and makes the connection again.
class Connection {
 public:
  Connection(asio::io_context& io, Load& load, uint64_t seed, size_t index)
      : stream_(io), retry_(io), load_(load), rng_(seed), index_(index) {}
  void start() { connect(); }
  Tally& tally() { return tally_; }

 private:
  void connect() {
    stream_.expires_after(std::chrono::seconds(5));
    stream_.async_connect(load_.endpoints, [this](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return fail(/*connecting=*/true);
      send();
    });
  }
  // A refused connection is tried again after 10 ms, not in a tight loop.
  void fail(bool connecting = false) {
    ++tally_.errors;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    buffer_.clear();
    if (Clock::now() >= load_.end) return;
    if (!connecting) return connect();
    retry_.expires_after(std::chrono::milliseconds(10));
    retry_.async_wait([this](beast::error_code) { connect(); });
  }
  bool next_target(std::string& target) {
    if (!load_.words.empty()) {
      target = "/search?k=10&q=";
      const int n = std::uniform_int_distribution<int>(1, 4)(rng_);
      for (int w = 0; w < n; ++w) target += (w ? "+" : "") + load_.words[rng_() % load_.words.size()];
      if (!load_.distinct.empty())
        target += "+" + load_.distinct + std::to_string(index_) + "x" + std::to_string(sent_count_++);
      return true;
    }
    if (load_.repeat) return target = load_.targets[0], true;
    const size_t i = load_.next++;
    if (i >= load_.targets.size()) return false;
    return target = load_.targets[i], true;
  }
  void send() {
    std::string target;
    if (Clock::now() >= load_.end || !next_target(target)) return;  // done: the loop runs out of work
    request_ = {beast::http::verb::get, target, 11};
    request_.set(beast::http::field::host, load_.host);
    for (const auto& [name, value] : load_.headers) request_.set(name, value);
    request_.keep_alive(true);
    response_ = {};
    sent_ = Clock::now();
    stream_.expires_after(std::chrono::seconds(5));
    beast::http::async_write(stream_, request_, [this](beast::error_code ec, size_t) {
      if (ec) return fail();
      beast::http::async_read(stream_, buffer_, response_, [this](beast::error_code ec2, size_t) {
        if (ec2) return fail();
        tally_.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent_).count());
        if (response_.result_int() != 200) ++tally_.not_ok;
        send();
      });
    });
  }

  beast::tcp_stream stream_;
  asio::steady_timer retry_;
  Load& load_;
  std::mt19937_64 rng_;
  size_t index_;             // of the connection
  uint64_t sent_count_ = 0;  // its queries so far (--distinct)
  beast::flat_buffer buffer_;
  beast::http::request<beast::http::empty_body> request_;
  beast::http::response<beast::http::string_body> response_;
  Clock::time_point sent_;
  Tally tally_;
};

int run(int argc, char** argv) {
  warp::Flags flags("usage: http_load --address HOST:PORT (--targets FILE | --target PATH) [flags]");
  flags.value("address", "127.0.0.1:8080", "the server")
      .value("targets", "", "request targets, one per line, each sent once (uncached queries)")
      .value("target", "", "one request target sent again and again (cached queries)")
      .value("words", "", "a word list: each request is /search?k=10&q= 1-4 random words of it")
      .boolean("distinct",
               "with --words: each query also holds a term of its own that no document has, so none is answered from "
               "the broker's result cache (without it, runs repeat each other's queries)")
      .value("connections", "16", "keep-alive connections sending")
      .value("threads", "", "event loops the connections are spread over (default: a quarter of the cores)")
      .value("seconds", "10", "how long to send")
      .value("idle", "0", "connections opened first and left idle for the whole run")
      .value("label", "", "first column of the printed row")
      .value("header", "", "'Name: value' sent with every request, e.g. a bearer token (repeatable)", true);
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
  Load load;
  load.host = host;
  for (const std::string& header : flags.all("header")) {
    const size_t colon = header.find(':');
    if (header.empty()) continue;
    if (colon == std::string::npos) throw warp::Error("--header takes 'Name: value', not '" + header + "'");
    const size_t value = std::min(header.find_first_not_of(' ', colon + 1), header.size());
    load.headers.emplace_back(header.substr(0, colon), header.substr(value));
  }
  load.targets = std::move(targets);
  load.repeat = flags.get("targets").empty();
  load.words = std::move(words);
  // A prefix of letters and digits no run shares: this run's queries repeat no earlier run's either.
  if (flags.is_set("distinct")) load.distinct = "zq" + std::to_string(std::random_device{}() % 1000000000u) + "x";
  asio::io_context io;
  load.endpoints = tcp::resolver(io).resolve(host, std::to_string(port));

  std::vector<tcp::socket> idle;
  for (uint64_t i = 0; i < flags.count("idle"); ++i) {
    idle.emplace_back(io);
    asio::connect(idle.back(), load.endpoints);
  }

  const size_t connections = std::max<uint64_t>(1, flags.count("connections"));
  const size_t threads = std::clamp<size_t>(
      flags.get("threads").empty() ? std::max(1u, std::thread::hardware_concurrency() / 4) : flags.count("threads"), 1,
      connections);
  std::vector<std::unique_ptr<asio::io_context>> loops;
  for (size_t t = 0; t < threads; ++t) loops.push_back(std::make_unique<asio::io_context>(1));
  std::vector<std::unique_ptr<Connection>> open;
  for (size_t c = 0; c < connections; ++c) {
    open.push_back(std::make_unique<Connection>(*loops[c % threads], load, c * 7919 + 17, c));
  }
  const auto start = Clock::now();
  load.end = start + std::chrono::seconds(flags.count("seconds"));
  for (auto& connection : open) connection->start();
  std::vector<std::thread> running;
  for (auto& loop : loops) running.emplace_back([&loop] { loop->run(); });
  for (auto& thread : running) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Tally all;
  for (auto& connection : open) {
    const Tally& tally = connection->tally();
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
