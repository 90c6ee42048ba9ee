// The write log's tail for leaves (the near-real-time path, docs/writes.md): a ZeroMQ ROUTER that
// answers TailRequests (common/protocol/write.capnp) with the LoggedWrites after the sequence a
// leaf holds, at once when there are some, else as soon as the next commit brings some or the
// request's wait ends (a long poll: a write reaches the leaves within a round trip of its commit).
// One thread owns the socket and the CollectionState: commits reach it from the log's committer
// through a queue, never computed on the committer; their documents are analyzed in parallel (the
// part of a write that does not depend on the writes before it), their statistics applied in order. It keeps the writes
// after the generation before the latest (leaves keep that one too); a leaf asking for older ones is told to take a
// newer generation. With Curve, only leaf*.pub keys may connect.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/analysis/analyzer.hpp"
#include "common/transfer/curve.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp::writes {

class TailEndpoint {
 public:
  // Starts from generation `generation` in `generation_dir` (0 and empty: none yet) holding the
  // log's writes up to `folded`, its inputs fingerprinted as `fingerprint`; replays the log after
  // `folded`. Registers itself as the log's durable listener. The puts of each run of commits are
  // analyzed on up to `analysis_threads` threads, then applied in order on the tail's own.
  TailEndpoint(const std::string& endpoint, WriteLog& log, const AnalyzerConfig& analyzer,
               const std::string& generation_dir, uint64_t generation, uint64_t folded, const std::string& fingerprint,
               size_t analysis_threads = 1, const transfer::CurveConfig& curve = {});
  ~TailEndpoint();
  TailEndpoint(const TailEndpoint&) = delete;
  TailEndpoint& operator=(const TailEndpoint&) = delete;
  const std::string& endpoint() const { return endpoint_; }  // as bound
  // A generation was published, holding the writes up to `folded`. Built from other inputs than
  // the statistics' generation (`fingerprint` differs), it starts a new epoch: the statistics are
  // computed again from it and the log after `folded`.
  void published(const std::string& generation_dir, uint64_t generation, uint64_t folded,
                 const std::string& fingerprint);
  uint64_t requests() const { return requests_; }
  uint64_t refused() const { return refused_; }  // malformed requests
  // The last write every leaf tailing now has applied (the least of what their latest requests
  // said they hold; a leaf not heard from for kTailerForgetMs no longer counts); UINT64_MAX when
  // none tails. The write socket's backpressure reads it.
  uint64_t applied_by_leaves() const { return applied_by_leaves_; }
  size_t tailers() const { return tailers_; }  // leaves counted in it
  static constexpr int kTailerForgetMs = 15000;

 private:
  struct State;
  void serve();
  std::unique_ptr<State> state_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0}, refused_{0}, applied_by_leaves_{UINT64_MAX};
  std::atomic<size_t> tailers_{0};
  std::thread thread_;
};

}  // namespace warp::writes
