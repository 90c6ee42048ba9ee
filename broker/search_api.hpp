// The broker's HTTP API: GET /search?q=&k=&mode= and POST /search with {"q","k","mode"}, plus
// /healthz, /readyz, /cluster and /metrics. Requests are validated (400 with a JSON error),
// normalized with the leaves' analyzer, answered from the result cache or by fan-out and merge.
#pragma once
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>

#include "broker/cluster.hpp"
#include "broker/result_cache.hpp"
#include "common/http/http_server.hpp"

namespace warp {

struct SearchApiOptions {
  std::chrono::milliseconds timeout{1000};  // per query, fan-out included
  size_t max_query_bytes = 16384;  // of q, through GET and POST alike
  size_t max_terms = 1024;         // distinct analyzed terms of a query (Elasticsearch bounds clauses at 1,024)
  size_t max_k = 1000;
};

class SearchApi {
 public:
  SearchApi(SearchApiOptions options, Cluster& cluster, ResultCache& cache, std::shared_ptr<prometheus::Registry> registry);
  http::Response handle(const http::Request& request);

 private:
  http::Response search(const http::Request& request);
  http::Response metrics();
  http::Response counted(const std::string& endpoint, http::Response response);

  SearchApiOptions options_;
  Cluster& cluster_;
  ResultCache& cache_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Histogram& latency_;
  prometheus::Family<prometheus::Histogram>& leaf_latency_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Counter& cache_evictions_;
  prometheus::Gauge& cache_bytes_;
  prometheus::Counter& retries_;
  prometheus::Counter& partials_;
  CacheStats reported_;  // cache counters already added to the Prometheus counters
  std::mutex metrics_mutex_;
};

}  // namespace warp
