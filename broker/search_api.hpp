// The broker's HTTP API: GET /search?q=&k=&offset=&mode= and POST /search with {"q","k","offset","mode"}, plus
// /healthz, /readyz, /cluster and /metrics (on the admin listener when there is one). Requests are
// validated (400 with a JSON error), checked against the bearer tokens (401), normalized with the
// leaves' analyzer, answered from the result cache or handed to the fan-out, whose callback
// answers; overload is refused at once (503 with Retry-After), never queued.
#pragma once
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <unordered_map>

#include "broker/auth_tokens.hpp"
#include "broker/cluster.hpp"
#include "broker/document_api.hpp"
#include "broker/fan_out.hpp"
#include "broker/search_params.hpp"
#include "broker/result_cache.hpp"
#include "common/http/http_server.hpp"
#include "common/http/io_pool.hpp"

namespace warp {

class FetchedDocuments;

struct SearchApiOptions {
  std::chrono::milliseconds timeout{1000};  // per query, fan-out included
  size_t max_query_bytes = 16384;           // of q, through GET and POST alike
  size_t max_terms = 1024;  // distinct analyzed terms of a query (Elasticsearch bounds clauses at 1,024)
  size_t max_k = 1000;
  size_t max_in_flight = 1024;  // queries in the fan-out; beyond: 503
  size_t max_outstanding =
      256;                      // requests outstanding to one replica; a partition whose replicas all have as many: 503
  AuthTokens* auth = nullptr;   // null: /search needs no token
  bool admin_listener = false;  // health, readiness, cluster and metrics only on the admin listener
  size_t zmq_io_threads = 0;    // ZeroMQ I/O threads of the fan-out; 0: one per eight event loops
  bool direct_search = true;    // searches over the leaves' direct search path where offered
  DocumentApi* documents = nullptr;             // the write API under /indexes/ (--indexer); null: none
  std::chrono::milliseconds after_wait{10000};  // the longest a search with after=SEQUENCE waits for it
};

class SearchApi {
 public:
  // The fan-out runs on `pool`'s loops (shared with the HTTP server); stop the pool before the api goes.
  SearchApi(SearchApiOptions options, Cluster& cluster, ResultCache& cache,
            std::shared_ptr<prometheus::Registry> registry, http::IoPool& pool);
  ~SearchApi();  // searches still waiting for writes answered 503
  SearchApi(const SearchApi&) = delete;
  SearchApi& operator=(const SearchApi&) = delete;
  // The main listener.
  void handle(const http::Request& request, http::Respond respond);
  // On a request's header, before its body is read (http::ServerOptions::admit): 401 without a
  // listed bearer token where --auth-tokens is set, else nullopt.
  std::optional<http::Response> admit(const http::Request& head);
  // The admin listener: /healthz, /readyz, /cluster, /metrics, never a token.
  http::Response handle_admin(const http::Request& request);
  // HTTP connection figures for the metrics (set once the servers exist).
  void watch_servers(std::function<http::ServerStats()> stats) { server_stats_ = std::move(stats); }

 private:
  void search(const http::Request& request, http::Respond respond);
  // Searches with after=SEQUENCE waiting for every partition to serve those writes: checked every
  // 5 ms on a thread of their own, searched again once there, answered 504 past after_wait.
  struct AfterWaiter {
    http::Request request;
    uint64_t after;
    http::Respond respond;
    std::chrono::steady_clock::time_point deadline;
  };
  void wait_for_writes(const http::Request& request, uint64_t after, http::Respond respond);
  void watch_writes();
  std::mutex after_mutex_;
  std::condition_variable after_wake_;
  std::vector<AfterWaiter> after_waiters_;
  bool after_stop_ = false;
  std::thread after_thread_;
  http::Response metrics();
  http::Response counted(const std::string& endpoint, http::Response response);
  void respond_counted(const std::string& endpoint, const http::Respond& respond, http::Response response);
  http::Response refuse(const std::string& reason, const std::string& message);
  void observe_stages(const FanOutResult& result, double total_ms);
  // A search as its answer shows it (what the fan-out's callbacks carry).
  struct ShownSearch {
    SearchParams params;
    std::vector<QueryTerm> terms;
    std::vector<std::vector<std::string>> phrases;  // highlighted as one in snippets
    std::string mode_text, key;
    std::chrono::steady_clock::time_point start;
  };
  std::string search_body(const ShownSearch& shown, const FanOutResult& result,
                          const std::vector<const BrokerHit*>& page, const FetchedDocuments* fetched, bool partial);
  // GET /indexes/default/documents/{id}: the stored document, read from the leaves.
  void get_document(const http::Request& request, const std::string& id, http::Respond respond);

  SearchApiOptions options_;
  Cluster& cluster_;
  ResultCache& cache_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Histogram& latency_;
  prometheus::Family<prometheus::Histogram>& leaf_latency_;
  // An uncached full answer's time split along the partition that answered last (docs/operations/monitoring.md).
  prometheus::Family<prometheus::Histogram>& stages_;
  prometheus::Histogram &stage_broker_, &stage_transport_, &stage_leaf_;
  // Each replica's histogram, found once (Family::Add builds and hashes a label map each call).
  prometheus::Histogram& leaf_latency(const std::string& replica);
  std::mutex leaf_latency_mutex_;
  std::unordered_map<std::string, prometheus::Histogram*> leaf_latency_by_replica_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Counter& cache_evictions_;
  prometheus::Gauge& cache_bytes_;
  prometheus::Counter& retries_;
  prometheus::Family<prometheus::Counter>& leaf_requests_;  // by path
  prometheus::Counter &sent_direct_, &sent_zmq_;
  uint64_t reported_direct_ = 0, reported_zmq_ = 0;
  prometheus::Counter& partials_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Counter& unauthorized_;
  prometheus::Gauge& in_flight_;
  prometheus::Gauge& connections_open_;
  prometheus::Counter& connections_total_;
  prometheus::Counter& connections_refused_;
  prometheus::Counter& connection_timeouts_;
  prometheus::Family<prometheus::Gauge>& replicas_;  // {partition, state}
  prometheus::Counter& dns_failures_;
  uint64_t reported_dns_failures_ = 0;
  CacheStats reported_;  // cache counters already added to the Prometheus counters
  http::ServerStats reported_server_;
  std::function<http::ServerStats()> server_stats_;
  std::mutex metrics_mutex_;
  FanOut fan_out_;
};

}  // namespace warp
