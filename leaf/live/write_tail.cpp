#include "leaf/live/write_tail.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <zmq.hpp>

#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/tail_frames.hpp"
#include "leaf/live/live_writes.hpp"

namespace warp {

namespace {
using Clock = std::chrono::steady_clock;
constexpr uint32_t kMaxWritesAsked = 2000;
constexpr uint32_t kMergingWaitMs = 50;
}  // namespace

WriteTail::WriteTail(TailOptions options, LeafServer& server, prometheus::Registry& registry)
    : options_(std::move(options)),
      server_(server),
      live_(std::make_shared<LiveWrites>()),
      held_(prometheus::BuildGauge()
                .Name("warpsearch_leaf_live_writes")
                .Help("Writes through the API served over the generation (not yet in a generation the leaf serves)")
                .Register(registry)
                .Add({})),
      applied_(prometheus::BuildCounter()
                   .Name("warpsearch_leaf_live_writes_applied_total")
                   .Help("Writes through the API taken from the indexer's write-log tail")
                   .Register(registry)
                   .Add({})),
      snapshot_seconds_(prometheus::BuildGauge()
                            .Name("warpsearch_leaf_live_snapshot_seconds")
                            .Help("Time the last tail answer took to be served (its overlay and segment built)")
                            .Register(registry)
                            .Add({})),
      segments_(prometheus::BuildGauge()
                    .Name("warpsearch_leaf_live_segments")
                    .Help("Segments of written documents searched beside the generation, over every partition")
                    .Register(registry)
                    .Add({})),
      merges_(prometheus::BuildGauge()
                  .Name("warpsearch_leaf_live_merges")
                  .Help("Merges of written documents' segments under way")
                  .Register(registry)
                  .Add({})),
      apply_delay_(
          prometheus::BuildHistogram()
              .Name("warpsearch_leaf_live_apply_delay_seconds")
              .Help("From a write durable in the indexer's log to its being searched on this leaf (wall clocks)")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1,
                                                               2, 5})) {
  std::shared_ptr<LiveWrites> live = live_;
  server_.set_over_base([live, this](std::shared_ptr<const LoadedIndex> base) {
    auto served = live->rebase(std::move(base));
    held_.Set(static_cast<double>(live->writes_held()));
    return served;
  });
  server_.set_written_lookup([live](std::string_view id) { return live->written(id); });
  thread_ = std::thread([this] { run(); });
}

WriteTail::~WriteTail() {
  stop_ = true;
  thread_.join();
}

void WriteTail::run() {
  zmq::context_t context(1);
  std::unique_ptr<zmq::socket_t> socket;
  std::string last_error;
  const auto pause = [&](int ms) {
    for (int i = 0; i < ms / 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  std::optional<uint64_t> asked;  // the `after` of the request in flight
  Clock::time_point deadline, last_asked;
  bool keeping_up = false;  // the last answer was not full: the next ask waits out min_interval_ms
  const auto ask = [&](uint64_t after, uint32_t wait) {
    socket->send(transfer::tail_request_frame(after, wait, kMaxWritesAsked), zmq::send_flags::none);
    asked = after;
    last_asked = Clock::now();
    deadline = last_asked + std::chrono::milliseconds(wait + 3000);
  };
  while (!stop_) {
    uint64_t after = 0;
    bool has_base = false, waiting = false, merging = false;
    server_.serve_live([&]() -> std::shared_ptr<const LoadedIndex> {
      after = live_->after(), has_base = live_->has_base(), waiting = live_->waiting_for_generation();
      merging = live_->merges_running() > 0;
      return nullptr;
    });
    if (!has_base) {
      pause(50);
      continue;
    }
    if (!socket) {
      socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
      socket->set(zmq::sockopt::linger, 0);
      socket->set(zmq::sockopt::maxmsgsize, int64_t{1} << 30);
      if (options_.curve.enabled())
        transfer::make_curve_client(*socket, options_.curve, transfer::curve_server_key(options_.curve, "indexer"));
      socket->connect(options_.endpoint);
      asked.reset();
    }
    if (!asked) {
      if (waiting) pause(200);  // only to hear of a new epoch: the generation comes by the follower
      const auto due = last_asked + std::chrono::milliseconds(options_.min_interval_ms);
      if (keeping_up && !waiting && Clock::now() < due) std::this_thread::sleep_until(due);
      keeping_up = false;
      // While segments merge, a short wait: an answer, even an empty one, takes the merged ones in.
      ask(after, waiting ? 0 : merging ? std::min<uint32_t>(options_.wait_ms, kMergingWaitMs) : options_.wait_ms);
    }
    zmq::pollitem_t item{socket->handle(), 0, ZMQ_POLLIN, 0};
    bool heard = false;
    while (!stop_ && !heard && Clock::now() < deadline) heard = zmq::poll(&item, 1, std::chrono::milliseconds(50)) > 0;
    if (stop_) break;
    if (!heard) {  // the indexer is away: a fresh socket, so no late answer crosses the next ask
      socket.reset();
      continue;
    }
    zmq::message_t body;
    if (!socket->recv(body) || body.more()) {  // one frame, as the indexer's ROUTER sends it
      socket.reset();
      continue;
    }
    const uint64_t answered_after = *asked;
    asked.reset();
    try {
      const auto start = Clock::now();
      const transfer::TailAnswer answer = transfer::read_tail_reply(body, answered_after);
      if (!answer.error.empty()) {
        if (answer.error != last_error) std::fprintf(stderr, "warp-leaf: write-log tail: %s\n", answer.error.c_str());
        last_error = answer.error;
        pause(200);
        continue;
      }
      last_error.clear();
      // A full answer: more are waiting. The next ask goes out before this answer is applied, so
      // that the indexer prepares it meanwhile (were this one not applied whole, its answer is
      // dropped and asked again).
      keeping_up = answer.writes.size() < kMaxWritesAsked;
      if (answer.writes.size() == kMaxWritesAsked && !waiting) ask(answer.writes.back().sequence, options_.wait_ms);
      size_t held = 0, segments = 0, merges = 0;
      server_.serve_live([&] {
        auto served = live_->take(answer);
        held = live_->writes_held(), segments = live_->segments(), merges = live_->merges_running();
        return served;
      });
      held_.Set(static_cast<double>(held));
      segments_.Set(static_cast<double>(segments));
      merges_.Set(static_cast<double>(merges));
      const int64_t now =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      for (const LoggedWrite& write : answer.writes)
        if (write.logged_unix_ns > 0)
          apply_delay_.Observe(std::max<double>(0, (now - static_cast<int64_t>(write.logged_unix_ns)) * 1e-9));
      applied_.Increment(static_cast<double>(answer.writes.size()));
      if (!answer.writes.empty()) snapshot_seconds_.Set(std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warp-leaf: write-log tail: dropped an answer: %s\n", e.what());
      pause(200);
    }
  }
}

}  // namespace warp
