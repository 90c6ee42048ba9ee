// The indexer's Prometheus metrics (warpsearch_indexer_…). `warp-indexer serve` renders them on
// /metrics of its HTTP server (serve_command.cpp), the services' own asynchronous one: prometheus-cpp's
// server had given each connection one of its two threads, so two idle connections starved every
// scrape after them.
#pragma once
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace warp {

class IndexerMetrics {
 public:
  IndexerMetrics();
  // The Prometheus text format of every metric.
  std::string text() const;

  prometheus::Counter& documents;       // warpsearch_indexer_documents_total
  prometheus::Counter& bytes;           // warpsearch_indexer_input_bytes_total
  prometheus::Counter& rejected;        // warpsearch_indexer_records_rejected_total
  prometheus::Counter& replaced;        // warpsearch_indexer_documents_replaced_total
  prometheus::Counter& runs_written;    // warpsearch_indexer_runs_written_total
  prometheus::Counter& runs_merged;     // warpsearch_indexer_runs_merged_total
  prometheus::Counter& generations;     // warpsearch_indexer_generations_published_total
  prometheus::Gauge& generation;        // warpsearch_indexer_generation
  prometheus::Gauge& build_seconds;     // warpsearch_indexer_last_build_seconds
  prometheus::Counter& fetch_requests;  // warpsearch_indexer_fetch_requests_total
  prometheus::Counter& builds_failed;   // warpsearch_indexer_builds_failed_total
  // The build in progress, updated every second as `warp-indexer build` prints its progress line
  // (zero between builds): input bytes read of the total, MB/s so far, ETA, documents.
  prometheus::Gauge& build_bytes;        // warpsearch_indexer_build_input_bytes
  prometheus::Gauge& build_total_bytes;  // warpsearch_indexer_build_input_total_bytes
  prometheus::Gauge& build_rate;         // warpsearch_indexer_build_bytes_per_second
  prometheus::Gauge& build_eta;          // warpsearch_indexer_build_eta_seconds
  prometheus::Gauge& build_documents;    // warpsearch_indexer_build_documents
  // --gpu-analysis, summed over builds: documents the GPU analyzed, their chunks' tokens, tokens its
  // table missed (looked up on the CPU), builds in which it failed and the CPU went on.
  prometheus::Counter& gpu_documents;  // warpsearch_indexer_gpu_analysis_documents_total
  prometheus::Counter& gpu_tokens;     // warpsearch_indexer_gpu_analysis_tokens_total
  prometheus::Counter& gpu_misses;     // warpsearch_indexer_gpu_analysis_misses_total
  prometheus::Counter& gpu_failures;   // warpsearch_indexer_gpu_analysis_failures_total
  // The write log (--write): ops acknowledged, its last sequence and bytes, the sequence the latest
  // generation holds, and documents a build skipped as deleted.
  prometheus::Counter& write_ops;        // warpsearch_indexer_write_ops_total
  prometheus::Gauge& write_sequence;     // warpsearch_indexer_write_log_sequence
  prometheus::Gauge& write_log_bytes;    // warpsearch_indexer_write_log_bytes
  prometheus::Gauge& folded_sequence;    // warpsearch_indexer_folded_sequence
  prometheus::Counter& deleted_skipped;  // warpsearch_indexer_documents_deleted_total
  // The documents held at the log's head; with --tail, the furthest-behind leaf's lag, the leaves
  // tailing, and requests refused for that lag (the broker's 429).
  prometheus::Gauge& live_documents;      // warpsearch_indexer_live_documents
  prometheus::Gauge& apply_lag;           // warpsearch_indexer_write_apply_lag
  prometheus::Gauge& tailing_leaves;      // warpsearch_indexer_tailing_leaves
  prometheus::Counter& writes_held_back;  // warpsearch_indexer_write_requests_held_back_total

 private:
  std::shared_ptr<prometheus::Registry> registry_;

  explicit IndexerMetrics(std::shared_ptr<prometheus::Registry> registry);
};

}  // namespace warp
