// Name resolution for replica discovery: c-ares, asynchronous underneath, used here one name at a
// time from the broker's discovery thread with a timeout. Points at a given server (ip:port) or at
// the system's resolvers (/etc/resolv.conf).
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace warp {

class DnsResolver {
 public:
  // `server`: "IP:PORT" (or "IP"); empty: the system's resolvers. Throws Error if c-ares cannot start.
  explicit DnsResolver(const std::string& server = "");
  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // The name's addresses (IPv4 and IPv6, as text, sorted). An empty list when the name does not
  // exist or has no address (NXDOMAIN, NODATA); nothing when the answer could not be had (timeout,
  // server failure, refused), so a caller can keep what it knew.
  std::optional<std::vector<std::string>> resolve(const std::string& name, std::chrono::milliseconds timeout);
  const std::string& last_error() const { return last_error_; }

 private:
  struct State;
  State* state_;
  std::string last_error_;
};

}  // namespace warp
