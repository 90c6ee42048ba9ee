#include "common/util/cpu_wake_latency.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/util/status.hpp"

namespace warp {

CpuWakeLatencyRequest::CpuWakeLatencyRequest(int32_t microseconds) {
  if (microseconds < 0) {
    error_ = "a latency must be 0 or more microseconds";
    return;
  }
  const int fd = ::open(kCpuLatencyDevice, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = std::string("cannot open ") + kCpuLatencyDevice + ": " + std::strerror(errno);
    return;
  }
  // The device takes the value as a binary 32-bit integer; it holds while the descriptor is open.
  if (::write(fd, &microseconds, sizeof microseconds) != static_cast<ssize_t>(sizeof microseconds)) {
    error_ = std::string("cannot write ") + kCpuLatencyDevice + ": " + std::strerror(errno);
    ::close(fd);
    return;
  }
  fd_ = fd;
}

CpuWakeLatencyRequest::~CpuWakeLatencyRequest() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<CpuWakeLatencyRequest> request_cpu_wake_latency(const std::string& microseconds, const char* program) {
  if (microseconds.empty()) return nullptr;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(microseconds.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || value < 0 || value > INT32_MAX) {
    throw Error("--cpu-wake-latency-us must be a whole number of microseconds, 0 or more (got '" + microseconds + "')");
  }
  auto request = std::make_unique<CpuWakeLatencyRequest>(static_cast<int32_t>(value));
  if (request->held()) {
    const std::optional<int32_t> in_force = cpu_wake_latency_in_force();
    std::fprintf(stderr, "%s: holding a CPU wake-up latency request of %ld µs (in force on this host: %s)\n", program,
                 value, in_force ? (std::to_string(*in_force) + " µs").c_str() : "unknown");
  } else {
    std::fprintf(stderr, "%s: warning: --cpu-wake-latency-us %ld not held (%s); serving without it\n", program, value,
                 request->error().c_str());
  }
  return request;
}

std::optional<int32_t> cpu_wake_latency_in_force() {
  const int fd = ::open(kCpuLatencyDevice, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int32_t value = 0;
  const bool read_all = ::read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value);
  ::close(fd);
  if (!read_all) return std::nullopt;
  return value;
}

}  // namespace warp
