// Fan-out of queries to one replica of every partition, multiplexed on the broker's I/O threads
// (an IoPool shared with the HTTP server): each loop owns one DEALER socket per replica, watched
// through ZeroMQ's ZMQ_FD, and carries every query it started as a state machine, so no thread
// waits on ZeroMQ and a query is read, sent, answered and written on one thread. A query submitted
// from another thread goes to a loop round-robin; its callback runs on that loop. A replica that fails, answers with an
// error or stays silent past a third of the deadline is replaced by another replica of the same partition while time
// remains; partitions that cannot answer in time are reported, and the result is flagged partial.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/cluster.hpp"
#include "common/index/types.hpp"
#include "common/query/query.hpp"
#include "common/transfer/capnp_frames.hpp"

namespace warp {

// A hit as its leaf's reply holds it: the strings point into that reply (PartitionOutcome::reply),
// not copied (a query's twenty hits had been sixty allocations in the broker).
struct BrokerHit {
  DocId doc;
  float score;
  std::string_view id, title, url;
  uint32_t partition = 0;  // the one that answered it
  bool written = false;    // a document written since the generation (its docID past the generation's)
};

// A document a DocumentsRequest brought back (common/protocol/search.capnp FetchedDocument); its
// strings point into the reply, as a hit's do.
struct FetchedHit {
  bool found = false, has_snippet = false;
  DocId doc = 0;
  std::string_view id, source, snippet;
};

struct PartitionOutcome {
  uint32_t partition = 0;
  std::string status = "timeout";  // ok | error | timeout | unavailable
  std::string replica;             // the one that answered, or the last tried
  std::string error;
  int attempts = 0;
  double took_ms = 0;        // from the query's start to this partition's answer
  double round_trip_ms = 0;  // the answering attempt's, from its request sent to its reply read
  double leaf_ms = 0;        // of that, in the leaf (its queues and search; 0 from older leaves)
  uint64_t generation = 0;   // the generation that answered
  uint64_t and_matches = 0;
  std::vector<BrokerHit> hits;
  // Facets asked for: each field's values and counts on the partition (strings in `reply`).
  struct Facet {
    std::string_view field;
    std::vector<std::pair<std::string_view, uint64_t>> values;
    uint64_t others = 0, other_values = 0;
  };
  std::vector<Facet> facets;
  uint64_t facet_matches = 0;
  std::string facet_error;
  std::vector<FetchedHit> fetched;                     // a documents request's, in its order
  std::shared_ptr<const transfer::FrameReader> reply;  // the reply the hits' strings point into
};

struct FanOutResult {
  std::vector<PartitionOutcome> partitions;
  bool partial = false;
  int retries = 0;
  uint64_t generation = 0;  // the request's
};

// The fetch phase of a search and reads by id (query then fetch): what to ask each partition.
struct DocumentsPlan {
  // By partition, the docIDs its search reply gave and their external ids; only these partitions
  // are asked. Empty: every partition is asked for `ids` by id.
  std::map<uint32_t, std::vector<std::pair<DocId, std::string>>> hits;
  std::vector<std::string> ids;
  bool source = false;                            // the stored forms
  std::vector<std::string> terms;                 // analyzed query terms to highlight; empty: no snippets
  std::vector<std::vector<std::string>> phrases;  // the query's phrases, highlighted as one
  std::string field = "body";
  uint32_t length = 160;
  std::string pre_tag = "<em>", post_tag = "</em>";
};

struct FanOutRequest {
  std::vector<QueryTerm> terms;  // distinct terms with how often the query holds each
  QueryMode mode = QueryMode::kOr;
  size_t k = 10;
  std::chrono::milliseconds timeout{1000};           // for the whole query, retries included
  std::shared_ptr<const DocumentsPlan> documents{};  // set: a documents request instead of a search
  std::vector<std::string> required{};               // the query syntax's constraints (query.hpp)
  std::vector<std::vector<std::string>> excluded{};
  std::vector<std::vector<std::string>> phrases{}, excluded_phrases{};
  std::string filter{};               // filter_text of the request's filters; empty: none
  std::vector<std::string> facets{};  // fields to count
  uint32_t facet_values = 10;         // each field's values a partition lists
  // The generation every partition reads (Cluster::read_generation(); a fetch phase: its search's);
  // 0: each the one its replica serves.
  uint64_t generation = 0;
  uint64_t after = 0;  // read-your-writes: the writes the answers must hold (SearchRequest.after)
};

using FanOutDone = std::function<void(FanOutResult)>;

namespace http {
class IoPool;
}
}  // namespace warp
namespace zmq {
class context_t;
}
namespace warp {

class FanOut {
 public:
  // `pool` must be stopped before the FanOut is destroyed (its loops touch the FanOut's objects).
  // `zmq_io_threads`: ZeroMQ's own I/O threads behind the sockets; 0: one per eight loops.
  // `direct`: searches go over a leaf's direct search path where its status offers one (and the
  // link is up), else over ZeroMQ.
  FanOut(Cluster& cluster, http::IoPool& pool, size_t zmq_io_threads = 0, bool direct = true);
  ~FanOut();  // queries still in flight end without their callback
  FanOut(const FanOut&) = delete;
  FanOut& operator=(const FanOut&) = delete;

  // Thread-safe; `done` runs once, on the loop that carried the query (the calling one, if a loop).
  void submit(FanOutRequest request, FanOutDone done);
  size_t in_flight() const { return in_flight_; }

  // Leaf requests sent, by path.
  struct Counts {
    std::atomic<uint64_t> direct{0}, zmq{0};
  };
  const Counts& counts() const { return counts_; }

  struct Worker;

 private:
  Cluster& cluster_;
  http::IoPool& pool_;
  std::unique_ptr<zmq::context_t> context_;       // the sockets' own: closed with the FanOut, never at exit
  std::vector<std::unique_ptr<Worker>> workers_;  // one per loop of the pool
  std::atomic<size_t> next_worker_{0};
  std::atomic<size_t> in_flight_{0};
  Counts counts_;
};

// The global top-k of the partitions' lists: higher score first, ties to the smaller docID. An id
// answered by two partitions (a generation's document replaced by a write that the partition of
// its new copy has applied and the partition of the old one not yet) counts once, as its newest
// copy: the written one. Pointers into `result`, which must outlive them.
std::vector<const BrokerHit*> merge_hits(const FanOutResult& result, size_t k);

}  // namespace warp
