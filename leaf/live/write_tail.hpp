// Tails the indexer's write log (indexer/writes/tail_endpoint.hpp) for a following leaf: asks for
// the writes after the last it holds, long-polling, and serves each answer at once over the
// generation it serves (LiveWrites through LeafServer::serve_live). Behind the log, the next ask
// goes out before a full answer is applied (the indexer's reply and the leaf's indexing overlap);
// keeping up, answers come at most every min_interval_ms (each makes a snapshot to search). A silent indexer is asked
// again on a fresh socket; a malformed answer is logged and dropped. Metrics:
// warpsearch_leaf_live_writes (held over the generation), warpsearch_leaf_live_writes_applied_total,
// warpsearch_leaf_live_snapshot_seconds (the last answer's time to be served),
// warpsearch_leaf_live_segments and warpsearch_leaf_live_merges (segments searched, merges under way),
// warpsearch_leaf_live_apply_delay_seconds (from a write durable at the indexer to its search here;
// by the wall clocks of both, so only as good as their agreement across machines).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/transfer/curve.hpp"
#include "leaf/service/leaf_server.hpp"

namespace warp {

class LiveWrites;

struct TailOptions {
  std::string endpoint{};         // the indexer's --tail
  transfer::CurveConfig curve{};  // enabled: CURVE to DIR/indexer.pub
  uint32_t wait_ms = 1000;        // how long the indexer may hold a request
  // After an answer that was not full (the leaf keeps up), the next ask waits until this long
  // after that answer's was sent: fewer, larger snapshots while writes trickle in.
  uint32_t min_interval_ms = 20;
};

class WriteTail {
 public:
  WriteTail(TailOptions options, LeafServer& server, prometheus::Registry& registry);
  ~WriteTail();

 private:
  void run();
  TailOptions options_;
  LeafServer& server_;
  std::shared_ptr<LiveWrites> live_;  // used under the server's live lock only
  prometheus::Gauge& held_;
  prometheus::Counter& applied_;
  prometheus::Gauge& snapshot_seconds_;
  prometheus::Gauge& segments_;
  prometheus::Gauge& merges_;
  prometheus::Histogram& apply_delay_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warp
