// `warp-indexer serve`: the indexer as a long-running service. It builds a new generation when its
// inputs change (checked every --rescan seconds), writes it to ROOT/gen-NNNNNN.tmp and renames it
// into place only when complete, then announces it; it serves the files to leaves and exposes
// metrics. A killed indexer leaves at most a .tmp directory, never announced and removed at the
// next start. Generations before the one announced and the one before it are removed (after they
// are no longer served). SIGTERM or SIGINT: the current step finishes, then the service exits cleanly.
// `warp-indexer fetch`: the leaf side as a command: wait for an announcement and fetch it.
#pragma once
#include <string>
#include <vector>

#include "indexer/build_command.hpp"

namespace warp {

struct ServeOptions {
  std::vector<std::string> inputs;
  std::string root;
  BuildOptions build;
  pipeline::PipelineOptions pipeline;
  std::string publish_endpoint = "tcp://127.0.0.1:5601";
  std::string fetch_endpoint = "tcp://127.0.0.1:5602";
  std::string metrics_address;  // e.g. 127.0.0.1:9101; empty: none
  double rescan_seconds = 10;
  bool once = false;        // build and publish at most one generation, serve until stopped
  std::string curve_keys;   // CurveZMQ: indexer.key and the allowed leaf*.pub; empty: off
  std::string signing_key;  // generation-signing.key: announcements' manifests signed; empty: unsigned
  // Documents put and deleted through the API: the write socket brokers send them to (empty: none),
  // durable in ROOT/writes.log before they are acknowledged, folded into a new generation at most
  // every fold_interval_ms.
  std::string write_endpoint;
  // The write log's tail for leaves (--tail; indexer/writes/tail_endpoint.hpp); empty: none.
  std::string tail_endpoint;
  size_t tail_threads = 0;  // threads analyzing the tail's documents (0: a quarter of the cores, 1..8)
  uint64_t fold_interval_ms = 1000;
  uint64_t fold_max_writes = 100000;  // a fold sooner once this many writes wait
  uint64_t max_apply_lag = 100000;    // with a tail: writes refused while a leaf lags more (0: never)
  int build_nice = 10;                // the builds' threads this much nicer than the serving ones (0: same)
};

int run_serve_command(const ServeOptions& options);

struct FetchCommandOptions {
  std::string from;  // the indexer's publish endpoint
  std::string root;  // where gen-NNNNNN directories go
  double timeout_seconds = 30;
  std::string curve_keys;      // CurveZMQ: leaf.key (the fetch acts as a leaf) and indexer.pub; empty: off
  std::string generation_key;  // the indexer's generation-signing.pub; empty: unsigned_generations must be set
  bool unsigned_generations = false;
};

int run_fetch_command(const FetchCommandOptions& options);

}  // namespace warp
