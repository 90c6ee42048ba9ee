#include "broker/index_writer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <zmq.hpp>

#include "common/protocol/write.capnp.h"
#include "common/transfer/capnp_frames.hpp"

namespace warp {

struct IndexWriter::State {
  struct Waiting {
    std::function<void(const WriteOutcome&)> done;
    std::chrono::steady_clock::time_point deadline;
  };
  zmq::context_t context{1};
  zmq::socket_t dealer{context, zmq::socket_type::dealer};
  std::chrono::milliseconds timeout;
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::mutex mutex;  // `queued`
  std::deque<std::pair<std::vector<DocumentWrite>, std::function<void(const WriteOutcome&)>>> queued;
  std::map<uint64_t, Waiting> waiting;  // the link thread's alone
  uint64_t next_id = 1;
  std::atomic<bool> stop{false};
  ~State() { ::close(wake); }
};

IndexWriter::IndexWriter(const std::string& endpoint, const transfer::CurveConfig& curve,
                         std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()) {
  state_->timeout = timeout;
  state_->dealer.set(zmq::sockopt::linger, 0);
  state_->dealer.set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);  // replies are small
  if (curve.enabled()) transfer::make_curve_client(state_->dealer, curve, transfer::curve_server_key(curve, "indexer"));
  state_->dealer.connect(endpoint);
  thread_ = std::thread([this] { run(); });
}

IndexWriter::~IndexWriter() {
  state_->stop = true;
  thread_.join();
}

void IndexWriter::write(std::vector<DocumentWrite> writes, std::function<void(const WriteOutcome&)> done) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queued.emplace_back(std::move(writes), std::move(done));
  }
  const uint64_t one = 1;
  if (::write(state_->wake, &one, sizeof one) < 0) {
  }  // the counter is far from its limit
}

void IndexWriter::run() {
  State& s = *state_;
  const auto fail = [](State::Waiting& waiting, const std::string& why) {
    WriteOutcome outcome;
    outcome.error = why;
    outcome.unavailable = true;
    waiting.done(outcome);
  };
  while (!s.stop) {
    zmq::pollitem_t items[] = {{s.dealer.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, s.wake, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(50));
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t ignored = 0;
      if (::read(s.wake, &ignored, sizeof ignored) < 0) {
      }
      std::deque<std::pair<std::vector<DocumentWrite>, std::function<void(const WriteOutcome&)>>> queued;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        queued.swap(s.queued);
      }
      for (auto& [writes, done] : queued) {
        const uint64_t id = s.next_id++;
        capnp::MallocMessageBuilder builder;
        auto request = builder.initRoot<protocol::WriteRequest>();
        request.setRequestId(id);
        auto ops = request.initOps(static_cast<unsigned>(writes.size()));
        for (size_t i = 0; i < writes.size(); ++i) {
          ops[i].setKind(writes[i].put ? 1 : 2);
          ops[i].setId(writes[i].id);
          ops[i].setDocument(writes[i].document);
        }
        State::Waiting waiting{std::move(done), std::chrono::steady_clock::now() + s.timeout};
        if (!s.dealer.send(transfer::to_frame(builder), zmq::send_flags::dontwait)) {
          fail(waiting, "the indexer's write socket is not reachable");
          continue;
        }
        s.waiting.emplace(id, std::move(waiting));
      }
    }
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t frame;
      while (s.dealer.recv(frame, zmq::recv_flags::dontwait)) {
        try {
          transfer::FrameReader reader(frame);
          auto reply = reader.root<protocol::WriteReply>();
          auto found = s.waiting.find(reply.getRequestId());
          if (found == s.waiting.end()) continue;  // answered already (timed out)
          WriteOutcome outcome;
          outcome.last_sequence = reply.getLastSequence();
          outcome.folded_sequence = reply.getFoldedSequence();
          outcome.error = reply.getError();
          outcome.full = reply.getFull();
          outcome.behind = reply.getBehind();
          for (uint8_t result : reply.getResults()) outcome.results.push_back(result);
          auto done = std::move(found->second.done);
          s.waiting.erase(found);
          done(outcome);
        } catch (const std::exception&) {
          // not a reply of this protocol: dropped; its request times out
        }
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (auto it = s.waiting.begin(); it != s.waiting.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      fail(it->second, "the indexer did not answer within " + std::to_string(s.timeout.count()) +
                           " ms (the writes may or may not be logged; writing them again is safe)");
      it = s.waiting.erase(it);
    }
  }
  for (auto& [id, waiting] : s.waiting) fail(waiting, "the broker is stopping");
}

}  // namespace warp
