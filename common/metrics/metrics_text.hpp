// Renders a prometheus-cpp registry in the Prometheus text format, for /metrics endpoints served
// by the services' own HTTP server.
#pragma once
#include <prometheus/registry.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>

#include <string>

namespace warp {

inline std::string metrics_text(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// Latency buckets in seconds, 50 µs to 10 s.
inline prometheus::Histogram::BucketBoundaries latency_buckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
}

}  // namespace warp
