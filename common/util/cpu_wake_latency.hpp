// A PM QoS CPU latency request held for the life of a service (--cpu-wake-latency-us). While it
// is held the kernel keeps idle CPUs in states that wake within that many microseconds; at 0
// they poll instead of halting, so waking a thread needs no interrupt. Each query crosses
// several threads (ZeroMQ's I/O threads, the leaf's front end, the broker's loops), and on a
// host whose idle CPUs halt, a virtual machine most of all, those wake-ups are most of a lightly
// loaded query's time: on the development VM the bare ZeroMQ round trip fell from 87 to 40 µs
// and the broker's overhead at one connection from 0.16-0.17 to 0.11-0.13 ms (tests/bench/results/serving.md). Idle
// CPUs then spin: power (and on a VM the host's CPU time) for latency. The request is the host's (the lowest held wins)
// and ends when the descriptor closes, with the process however it ends.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace warp {

inline constexpr const char* kCpuLatencyDevice = "/dev/cpu_dma_latency";

class CpuWakeLatencyRequest {
 public:
  // Asks for `microseconds` (>= 0); where the device cannot be opened (not root, a container
  // without it) nothing is held and error() says why.
  explicit CpuWakeLatencyRequest(int32_t microseconds);
  ~CpuWakeLatencyRequest();
  CpuWakeLatencyRequest(const CpuWakeLatencyRequest&) = delete;
  CpuWakeLatencyRequest& operator=(const CpuWakeLatencyRequest&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

// For a service's --cpu-wake-latency-us: nothing for an empty value; else the request, with one
// line on stderr saying it is held (and what is in force) or why not (the service runs on).
// Throws on a value that is not a whole number of microseconds >= 0.
std::unique_ptr<CpuWakeLatencyRequest> request_cpu_wake_latency(const std::string& microseconds, const char* program);

// The host's request in force (the lowest held, or the kernel's default of 2,000 s), if readable.
std::optional<int32_t> cpu_wake_latency_in_force();

}  // namespace warp
