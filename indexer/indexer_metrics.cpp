#include "indexer/indexer_metrics.hpp"

#include "common/metrics/metrics_text.hpp"

namespace warp {
namespace {

prometheus::Counter& counter(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}
prometheus::Gauge& gauge(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

IndexerMetrics::IndexerMetrics() : IndexerMetrics(std::make_shared<prometheus::Registry>()) {}

IndexerMetrics::IndexerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : documents(counter(*registry, "warpsearch_indexer_documents_total", "Documents indexed")),
      bytes(counter(*registry, "warpsearch_indexer_input_bytes_total", "Input bytes read (uncompressed)")),
      rejected(counter(*registry, "warpsearch_indexer_records_rejected_total", "Malformed input records skipped")),
      replaced(counter(*registry, "warpsearch_indexer_documents_replaced_total",
                       "Documents replaced by a later one with the same id")),
      runs_written(counter(*registry, "warpsearch_indexer_runs_written_total", "Run files spilled to disk")),
      runs_merged(counter(*registry, "warpsearch_indexer_runs_merged_total", "Run files merged")),
      generations(counter(*registry, "warpsearch_indexer_generations_published_total", "Generations announced")),
      generation(gauge(*registry, "warpsearch_indexer_generation", "Latest published generation")),
      build_seconds(gauge(*registry, "warpsearch_indexer_last_build_seconds", "Duration of the last build")),
      fetch_requests(
          counter(*registry, "warpsearch_indexer_fetch_requests_total", "Partition file chunks requested by leaves")),
      builds_failed(counter(*registry, "warpsearch_indexer_builds_failed_total",
                            "Builds that failed (nothing published; retried at the next rescan)")),
      build_bytes(
          gauge(*registry, "warpsearch_indexer_build_input_bytes", "Input bytes read by the build in progress")),
      build_total_bytes(gauge(*registry, "warpsearch_indexer_build_input_total_bytes",
                              "Input bytes on disk of the build in progress")),
      build_rate(gauge(*registry, "warpsearch_indexer_build_bytes_per_second",
                       "Input bytes per second of the build in progress")),
      build_eta(gauge(*registry, "warpsearch_indexer_build_eta_seconds",
                      "Estimated seconds until the build in progress has read its input")),
      build_documents(
          gauge(*registry, "warpsearch_indexer_build_documents", "Documents read by the build in progress")),
      gpu_documents(counter(*registry, "warpsearch_indexer_gpu_analysis_documents_total",
                            "Documents analyzed on the GPU (--gpu-analysis)")),
      gpu_tokens(counter(*registry, "warpsearch_indexer_gpu_analysis_tokens_total",
                         "Tokens of the chunks analyzed on the GPU")),
      gpu_misses(counter(*registry, "warpsearch_indexer_gpu_analysis_misses_total",
                         "Tokens the GPU's table missed, looked up on the CPU")),
      gpu_failures(counter(*registry, "warpsearch_indexer_gpu_analysis_failures_total",
                           "Builds in which the GPU analysis failed and the CPU analyzed the rest")),
      write_ops(counter(*registry, "warpsearch_indexer_write_ops_total",
                        "Documents put or deleted through the API, durable")),
      write_sequence(
          gauge(*registry, "warpsearch_indexer_write_log_sequence", "The write log's last durable sequence")),
      write_log_bytes(gauge(*registry, "warpsearch_indexer_write_log_bytes", "Bytes of the write log")),
      folded_sequence(gauge(*registry, "warpsearch_indexer_folded_sequence",
                            "The last write the latest generation holds (the write log's sequence)")),
      deleted_skipped(counter(*registry, "warpsearch_indexer_documents_deleted_total",
                              "Input documents a build left out, deleted through the API")),
      live_documents(gauge(*registry, "warpsearch_indexer_live_documents",
                           "Documents the index holds at the head of the write log (--write)")),
      apply_lag(gauge(*registry, "warpsearch_indexer_write_apply_lag",
                      "Writes the log holds beyond what the furthest-behind tailing leaf has applied (--tail)")),
      tailing_leaves(gauge(*registry, "warpsearch_indexer_tailing_leaves",
                           "Leaves tailing the write log (heard from in the last 15 s)")),
      writes_held_back(counter(*registry, "warpsearch_indexer_write_requests_held_back_total",
                               "Write requests refused because a tailing leaf lagged more than --max-apply-lag")),
      registry_(std::move(registry)) {}

std::string IndexerMetrics::text() const { return metrics_text(*registry_); }

}  // namespace warp
