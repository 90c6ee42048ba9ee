// The broker's link to the indexer's write socket (indexer/writes/write_endpoint.hpp): sends
// WriteRequests over one ZeroMQ DEALER from a thread of its own and hands each reply to the
// callback of its request, on that thread. A request the indexer does not answer within the
// timeout is answered with an error (the indexer may still have logged it: a put or delete
// repeated is harmless, the same id's last copy wins).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/transfer/curve.hpp"

namespace warp {

struct DocumentWrite {
  bool put = true;  // false: delete
  std::string id;
  std::string document;  // put: the document as one JSON object
};

struct WriteOutcome {
  uint64_t last_sequence = 0;    // of the request's last write (its first: less size() - 1)
  uint64_t folded_sequence = 0;  // the indexer's latest generation holds writes up to here
  std::string error;             // empty: durable
  bool full = false;             // the error is the indexer's full disk
  bool unavailable = false;      // the indexer did not answer in time (or the request could not be sent)
  bool behind = false;           // refused: the leaves lag too far behind the log (answer 429)
  // By write, what it did (write.capnp WriteReply.results: 1 created, 2 replaced, 3 deleted, 4 not
  // found); empty where the indexer does not say.
  std::vector<uint8_t> results;
};

class IndexWriter {
 public:
  // `endpoint`: the indexer's --write endpoint; with Curve, this broker's key and indexer.pub.
  IndexWriter(const std::string& endpoint, const transfer::CurveConfig& curve, std::chrono::milliseconds timeout);
  ~IndexWriter();
  IndexWriter(const IndexWriter&) = delete;
  IndexWriter& operator=(const IndexWriter&) = delete;
  // `done` is called once, on the link's thread. An empty `writes` asks for the log's state.
  void write(std::vector<DocumentWrite> writes, std::function<void(const WriteOutcome&)> done);

 private:
  void run();
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace warp
