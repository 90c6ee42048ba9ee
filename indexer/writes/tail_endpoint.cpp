#include "indexer/writes/tail_endpoint.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/write.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/transfer/tail_frames.hpp"
#include "common/util/parallel_tasks.hpp"
#include "common/util/status.hpp"
#include "indexer/writes/collection_state.hpp"

namespace warp::writes {

namespace {
using Clock = std::chrono::steady_clock;
constexpr uint32_t kMaxWritesAReply = 2000;
constexpr uint32_t kMaxWaitMs = 10000;
constexpr size_t kOpsASlice = 64;     // a batch's analysis takes another thread per this many ops
constexpr size_t kReplayRun = 16384;  // ops of the log replayed at once
}  // namespace

struct TailEndpoint::State {
  State(WriteLog& log, const AnalyzerConfig& analyzer, size_t analysis_threads) : log(log), collection(analyzer) {
    for (size_t t = 0; t < std::max<size_t>(analysis_threads, 1); ++t)
      analyzers.push_back(std::make_unique<Analyzer>(analyzer));
  }
  ~State() { ::close(wake); }
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::unique_ptr<transfer::ZapAuthenticator> zap;
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  WriteLog& log;

  // From the committer and the serve loop's caller, to the thread.
  struct Event {
    uint64_t first = 0;
    uint64_t logged_unix_ns = 0;
    std::vector<WriteOp> ops{};
    bool published = false;
    std::string dir{}, fingerprint{};
    uint64_t generation = 0, folded = 0;
  };
  std::mutex mutex;
  std::deque<Event> incoming;
  void post(Event event) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      incoming.push_back(std::move(event));
    }
    const uint64_t one = 1;
    if (::write(wake, &one, sizeof one) < 0) {
    }  // the counter is far from its limit
  }

  // The thread's own.
  CollectionState collection;
  std::vector<std::unique_ptr<Analyzer>> analyzers;  // one a thread of a batch's analysis
  // The writes as sent: each encoded once (encode_logged_write), copied into every leaf's replies.
  struct Kept {
    uint64_t sequence;
    std::string encoded;
  };
  std::deque<Kept> kept;  // consecutive sequences, the last `applied`
  uint64_t applied = 0, epoch = 0, folded_before = 0, folded_latest = 0;
  std::string epoch_fingerprint;
  struct Waiter {
    std::string who;
    uint64_t after = 0;
    uint32_t max = 0;
    bool encoded = false;  // the leaf reads encodedWrites
    Clock::time_point deadline;
  };
  std::vector<Waiter> waiting;
  struct Tailer {
    uint64_t after = 0;
    Clock::time_point heard;
  };
  std::unordered_map<std::string, Tailer> tailers;  // by the leaf socket's identity

  uint64_t first_kept() const { return kept.empty() ? applied + 1 : kept.front().sequence; }
  // Ops in sequence order, the first right after `applied`: their puts analyzed in parallel (a
  // slice a thread, none while the state changes), applied one by one, then encoded in parallel.
  struct Pending {
    const WriteOp* op;
    uint64_t logged_unix_ns;
  };
  void apply_run(const std::vector<Pending>& run) {
    const size_t slices = std::min(analyzers.size(), run.size() / kOpsASlice + 1);
    const auto in_slices = [&](const std::function<void(size_t slice, size_t i)>& work) {
      const auto one = [&](size_t slice) {
        for (size_t i = run.size() * slice / slices; i < run.size() * (slice + 1) / slices; ++i) work(slice, i);
      };
      if (slices == 1)
        one(0);
      else
        run_parallel_tasks(slices, slices, one);
    };
    std::vector<AnalyzedPut> analyzed(run.size());
    in_slices([&](size_t slice, size_t i) {
      if (run[i].op->kind == WriteOp::Kind::kPut) analyzed[i] = collection.analyze(*analyzers[slice], *run[i].op);
    });
    std::vector<LoggedWrite> logged(run.size());
    for (size_t i = 0; i < run.size(); ++i) {
      bool ok = true;
      logged[i] = collection.apply(applied + 1 + i, *run[i].op, std::move(analyzed[i]), &ok);
      logged[i].logged_unix_ns = run[i].logged_unix_ns;
      if (!ok)
        std::fprintf(stderr, "warp-indexer: write %llu (id %s) is not a JSON object; it changes nothing\n",
                     static_cast<unsigned long long>(applied + 1 + i), run[i].op->id.c_str());
    }
    std::vector<std::string> encoded(run.size());
    in_slices([&](size_t, size_t i) { encoded[i] = transfer::encode_logged_write(logged[i]); });
    for (size_t i = 0; i < run.size(); ++i) kept.push_back({logged[i].sequence, std::move(encoded[i])});
    applied += run.size();
  }
  // Statistics from generation `generation` (none: 0) and the log after `folded`.
  void new_epoch(const std::string& dir, uint64_t generation, uint64_t folded, const std::string& fingerprint) {
    const auto start = Clock::now();
    if (dir.empty())
      collection.clear();
    else
      collection.load_generation(dir);
    kept.clear();
    applied = folded;
    std::vector<WriteOp> ops;  // in runs, analyzed in parallel as commits are
    std::vector<Pending> run;
    const auto flush = [&] {
      run.clear();
      for (const WriteOp& op : ops) run.push_back({&op, 0});
      apply_run(run);
      ops.clear();
    };
    log.replay(folded, [&](uint64_t, const WriteOp& op) {
      ops.push_back(op);
      if (ops.size() == kReplayRun) flush();
    });
    flush();
    epoch = generation, epoch_fingerprint = fingerprint;
    folded_before = folded_latest = folded;
    std::fprintf(stderr,
                 "warp-indexer: write-log tail over generation %llu (%llu documents) and %zu writes after it, %.2f s\n",
                 static_cast<unsigned long long>(generation), static_cast<unsigned long long>(collection.doc_count()),
                 kept.size(), std::chrono::duration<double>(Clock::now() - start).count());
  }
};

TailEndpoint::TailEndpoint(const std::string& endpoint, WriteLog& log, const AnalyzerConfig& analyzer,
                           const std::string& generation_dir, uint64_t generation, uint64_t folded,
                           const std::string& fingerprint, size_t analysis_threads, const transfer::CurveConfig& curve)
    : state_(std::make_unique<State>(log, analyzer, analysis_threads)) {
  try {
    state_->router.set(zmq::sockopt::linger, 0);
    state_->router.set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
    if (curve.enabled()) {
      state_->zap = std::make_unique<transfer::ZapAuthenticator>(state_->context, curve.allowed);
      transfer::make_curve_server(state_->router, curve);
    }
    state_->router.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error("write-log tail: cannot bind " + endpoint + ": " + e.what());
  }
  endpoint_ = state_->router.get(zmq::sockopt::last_endpoint);
  state_->new_epoch(generation_dir, generation, folded, fingerprint);
  State* state = state_.get();
  log.on_durable([state](uint64_t first, const std::vector<WriteOp>& ops) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    state->post(
        {.first = first,
         .logged_unix_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
         .ops = ops});
  });
  thread_ = std::thread([this] { serve(); });
}

TailEndpoint::~TailEndpoint() {
  stop_ = true;
  thread_.join();
}

void TailEndpoint::published(const std::string& generation_dir, uint64_t generation, uint64_t folded,
                             const std::string& fingerprint) {
  state_->post({.published = true,
                .dir = generation_dir,
                .fingerprint = fingerprint,
                .generation = generation,
                .folded = folded});
}

void TailEndpoint::serve() {
  State& s = *state_;
  const auto send = [&](const std::string& who, const zmq::message_t& frame) {
    s.router.send(zmq::buffer(who), zmq::send_flags::sndmore);
    s.router.send(zmq::const_buffer(frame.data(), frame.size()), zmq::send_flags::none);
  };
  // The answer to a leaf holding the writes up to `after`; false when there is nothing to send yet.
  const auto answer = [&](const std::string& who, uint64_t after, uint32_t max, bool encoded, bool or_empty) {
    transfer::TailAnswer reply;
    reply.epoch = s.epoch, reply.first_kept = s.first_kept(), reply.last = s.applied;
    std::vector<std::string_view> writes;
    if (after + 1 < s.first_kept()) {
      reply.error = "the writes after " + std::to_string(after) + " are folded into generation " +
                    std::to_string(s.epoch) + " or later: take a newer generation";
    } else if (after < s.applied) {
      const size_t from = static_cast<size_t>(after + 1 - s.first_kept());
      for (size_t i = from; i < s.kept.size() && writes.size() < max; ++i) writes.push_back(s.kept[i].encoded);
    } else if (!or_empty && after == s.applied) {
      return false;
    }
    if (encoded) {
      send(who, transfer::tail_reply_frame(reply, writes));
    } else {  // a leaf of an earlier release
      for (std::string_view write : writes) reply.writes.push_back(transfer::decode_logged_write(write));
      send(who, transfer::tail_reply_frame(reply));
    }
    return true;
  };
  while (!stop_) {
    auto timeout = std::chrono::milliseconds(100);
    const Clock::time_point now = Clock::now();
    for (const auto& w : s.waiting)
      timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(w.deadline - now) +
                                      std::chrono::milliseconds(1));
    zmq::pollitem_t items[] = {{s.router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, s.wake, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::max(timeout, std::chrono::milliseconds(0)));
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t ignored = 0;
      if (::read(s.wake, &ignored, sizeof ignored) < 0) {
      }  // drained: the queue says what is ready
      std::deque<State::Event> events;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        events.swap(s.incoming);
      }
      std::vector<State::Pending> run;  // the commits since the last publication, not replayed already
      const auto apply_run = [&] {
        try {
          s.apply_run(run);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "warp-indexer: write-log tail: %s\n", e.what());
        }
        run.clear();
      };
      for (State::Event& event : events) {
        if (!event.published) {
          for (size_t i = 0; i < event.ops.size(); ++i)
            if (event.first + i == s.applied + run.size() + 1) run.push_back({&event.ops[i], event.logged_unix_ns});
          continue;
        }
        apply_run();
        try {
          if (event.fingerprint != s.epoch_fingerprint) {
            s.new_epoch(event.dir, event.generation, event.folded, event.fingerprint);
          } else {
            s.folded_before = s.folded_latest, s.folded_latest = event.folded;
            while (!s.kept.empty() && s.kept.front().sequence <= s.folded_before) s.kept.pop_front();
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "warp-indexer: write-log tail: %s\n", e.what());
        }
      }
      apply_run();
    }
    const Clock::time_point after_events = Clock::now();
    uint64_t least = UINT64_MAX;
    std::erase_if(s.tailers, [&](const auto& entry) {
      return after_events - entry.second.heard > std::chrono::milliseconds(kTailerForgetMs);
    });
    for (const auto& [who, tailer] : s.tailers) least = std::min(least, tailer.after);
    applied_by_leaves_ = least;
    tailers_ = s.tailers.size();
    for (auto it = s.waiting.begin(); it != s.waiting.end();) {
      if (answer(it->who, it->after, it->max, it->encoded, after_events >= it->deadline))
        it = s.waiting.erase(it);
      else
        ++it;
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    zmq::message_t identity, body;
    if (!s.router.recv(identity) || !identity.more() || !s.router.recv(body)) continue;
    bool extra = false;
    while (body.more() && s.router.recv(body)) extra = true;
    const std::string who(static_cast<const char*>(identity.data()), identity.size());
    ++requests_;
    try {
      if (extra) throw Error("more than one frame");
      transfer::FrameReader frame(body);
      auto request = frame.root<protocol::TailRequest>();
      const uint32_t max = std::clamp<uint32_t>(request.getMaxWrites(), 1, kMaxWritesAReply);
      const uint32_t wait = std::min(request.getWaitMs(), kMaxWaitMs);
      std::erase_if(s.waiting, [&](const State::Waiter& w) { return w.who == who; });  // its newer ask replaces it
      s.tailers[who] = {request.getAfter(), Clock::now()};
      if (!answer(who, request.getAfter(), max, request.getEncoded(), wait == 0))
        s.waiting.push_back(
            {who, request.getAfter(), max, request.getEncoded(), Clock::now() + std::chrono::milliseconds(wait)});
    } catch (const std::exception& e) {
      ++refused_;
      transfer::TailAnswer reply;
      reply.error = std::string("malformed request: ") + e.what();
      send(who, transfer::tail_reply_frame(reply));
    }
  }
}

}  // namespace warp::writes
