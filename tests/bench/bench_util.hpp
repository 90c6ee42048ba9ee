// Timing helpers for the benchmarks: repeat a body until a minimum time has passed, report the
// median of several such runs.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace warp::bench {

// Seconds per call of `body`, median of `runs` runs of at least `min_seconds` each.
template <class Body>
double median_seconds_per_call(Body&& body, int runs = 5, double min_seconds = 0.05) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> per_call;
  for (int r = 0; r < runs; ++r) {
    size_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      body();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    per_call.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

inline double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(values.size())))];
}

}  // namespace warp::bench
