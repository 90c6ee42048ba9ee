#include "indexer/writes/write_endpoint.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <zmq.hpp>

#include "common/protocol/write.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/status.hpp"

namespace warp::writes {

struct WriteEndpoint::State {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::unique_ptr<transfer::ZapAuthenticator> zap;
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);      // the committer: replies are ready
  std::mutex mutex;                                         // the replies below
  std::deque<std::pair<std::string, std::string>> replies;  // (identity, reply frame)
  ~State() { ::close(wake); }
};

namespace {

std::string reply_bytes(uint64_t request_id, uint64_t last, uint64_t folded, const std::string& error,
                        const std::vector<WriteResult>& results = {}, bool behind = false) {
  capnp::MallocMessageBuilder builder;
  auto reply = builder.initRoot<protocol::WriteReply>();
  reply.setRequestId(request_id);
  reply.setLastSequence(last);
  reply.setFoldedSequence(folded);
  reply.setError(error);
  reply.setFull(error.find("No space") != std::string::npos || error.find("Disk quota") != std::string::npos);
  reply.setBehind(behind);
  auto list = reply.initResults(static_cast<unsigned>(results.size()));
  for (size_t i = 0; i < results.size(); ++i) list.set(static_cast<unsigned>(i), static_cast<uint8_t>(results[i]));
  const zmq::message_t frame = transfer::to_frame(builder);
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

}  // namespace

WriteEndpoint::WriteEndpoint(const std::string& endpoint, WriteLog& log, WriteEndpointOptions options)
    : state_(std::make_unique<State>()), log_(log), options_(std::move(options)) {
  const transfer::CurveConfig& curve = options_.curve;
  try {
    state_->router.set(zmq::sockopt::linger, 0);
    state_->router.set(zmq::sockopt::maxmsgsize, int64_t{256} << 20);
    if (curve.enabled()) {
      state_->zap = std::make_unique<transfer::ZapAuthenticator>(state_->context, curve.allowed);
      transfer::make_curve_server(state_->router, curve);
    }
    state_->router.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error("write endpoint: cannot bind " + endpoint + ": " + e.what());
  }
  endpoint_ = state_->router.get(zmq::sockopt::last_endpoint);
  thread_ = std::thread([this] { serve(); });
}

WriteEndpoint::~WriteEndpoint() {
  stop_ = true;
  thread_.join();
  log_.flush();  // the answers to this socket's appends come before its state goes
}

void WriteEndpoint::serve() {
  while (!stop_) {
    zmq::pollitem_t items[] = {{state_->router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, state_->wake, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(100));
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t ignored = 0;
      if (::read(state_->wake, &ignored, sizeof ignored) < 0) {
      }  // drained: the queue says what is ready
      std::deque<std::pair<std::string, std::string>> ready;
      {
        std::lock_guard<std::mutex> lock(state_->mutex);
        ready.swap(state_->replies);
      }
      for (auto& [identity, reply] : ready) {
        state_->router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
        state_->router.send(zmq::buffer(reply), zmq::send_flags::none);
      }
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    zmq::message_t identity, body;
    if (!state_->router.recv(identity) || !identity.more() || !state_->router.recv(body)) continue;
    bool extra = false;
    while (body.more() && state_->router.recv(body)) extra = true;
    if (extra) {
      ++refused_;
      continue;
    }
    ++requests_;
    const std::string who(static_cast<const char*>(identity.data()), identity.size());
    uint64_t request_id = 0;
    std::vector<WriteOp> ops;
    try {
      transfer::FrameReader frame(body);
      auto request = frame.root<protocol::WriteRequest>();
      request_id = request.getRequestId();
      for (auto op : request.getOps()) {
        if (op.getKind() != 1 && op.getKind() != 2) throw Error("an op of unknown kind");
        if (op.getId().size() == 0) throw Error("an op without an id");
        ops.push_back({static_cast<WriteOp::Kind>(op.getKind()), op.getId(), op.getDocument()});
      }
    } catch (const std::exception& e) {
      ++refused_;
      const std::string reply =
          reply_bytes(request_id, 0, options_.folded(), std::string("malformed request: ") + e.what());
      state_->router.send(zmq::buffer(who), zmq::send_flags::sndmore);
      state_->router.send(zmq::buffer(reply), zmq::send_flags::none);
      continue;
    }
    if (ops.empty()) {  // the log's state
      const std::string reply = reply_bytes(request_id, log_.last_sequence(), options_.folded(), "");
      state_->router.send(zmq::buffer(who), zmq::send_flags::sndmore);
      state_->router.send(zmq::buffer(reply), zmq::send_flags::none);
      continue;
    }
    if (options_.max_apply_lag > 0 && options_.applied_by_leaves) {
      const uint64_t applied = options_.applied_by_leaves(), last = log_.last_sequence();
      if (applied != UINT64_MAX && last > applied + options_.max_apply_lag) {
        ++held_back_;
        const std::string reply =
            reply_bytes(request_id, last, options_.folded(),
                        "the leaves have applied the write log up to " + std::to_string(applied) + " of " +
                            std::to_string(last) + " (at most " + std::to_string(options_.max_apply_lag) +
                            " writes behind): nothing of this request was kept, send it again shortly",
                        {}, true);
        state_->router.send(zmq::buffer(who), zmq::send_flags::sndmore);
        state_->router.send(zmq::buffer(reply), zmq::send_flags::none);
        continue;
      }
    }
    std::vector<WriteOp> keys;  // the ops without their documents: what LiveIds needs
    if (options_.ids) {
      keys.reserve(ops.size());
      for (const WriteOp& op : ops) keys.push_back({op.kind, op.id, {}});
    }
    log_.append(std::move(ops),
                [this, who, request_id, keys = std::move(keys)](uint64_t last, const std::string& error) {
                  std::vector<WriteResult> results;
                  if (error.empty() && options_.ids) results = options_.ids->apply(last + 1 - keys.size(), keys);
                  std::string reply = reply_bytes(request_id, last, options_.folded(), error, results);
                  {
                    std::lock_guard<std::mutex> lock(state_->mutex);
                    state_->replies.emplace_back(who, std::move(reply));
                  }
                  const uint64_t one = 1;
                  if (::write(state_->wake, &one, sizeof one) < 0) {
                  }  // the counter is far from its limit
                });
  }
}

}  // namespace warp::writes
