#include "broker/dns_resolver.hpp"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/select.h>

#include <algorithm>
#include <mutex>

#include "common/util/status.hpp"

namespace warp {

struct DnsResolver::State {
  ares_channel channel = nullptr;
};

namespace {

struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<std::string> addresses;
};

void on_addrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
  auto& lookup = *static_cast<Lookup*>(arg);
  lookup.done = true;
  lookup.status = status;
  if (result == nullptr) return;
  for (ares_addrinfo_node* node = result->nodes; node != nullptr; node = node->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (node->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(node->ai_addr)->sin_addr, text, sizeof text);
    } else if (node->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(node->ai_addr)->sin6_addr, text, sizeof text);
    } else {
      continue;
    }
    lookup.addresses.emplace_back(text);
  }
  ares_freeaddrinfo(result);
}

}  // namespace

DnsResolver::DnsResolver(const std::string& server) : state_(new State) {
  static std::once_flag library;
  std::call_once(library, [] { ares_library_init(ARES_LIB_INIT_ALL); });
  ares_options options{};
  options.timeout = 1000;  // per try, ms
  options.tries = 2;
  // No search domains and no /etc/hosts: a replica name is looked up as given, in DNS.
  options.ndomains = 0;
  options.lookups = const_cast<char*>("b");
  const int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS;
  if (const int status = ares_init_options(&state_->channel, &options, mask); status != ARES_SUCCESS) {
    delete state_;
    throw Error(std::string("DNS resolver: ") + ares_strerror(status));
  }
  if (!server.empty()) {
    if (const int status = ares_set_servers_ports_csv(state_->channel, server.c_str()); status != ARES_SUCCESS) {
      ares_destroy(state_->channel);
      delete state_;
      throw Error("--dns-server " + server + ": " + ares_strerror(status));
    }
  }
}

DnsResolver::~DnsResolver() {
  ares_destroy(state_->channel);
  delete state_;
}

std::optional<std::vector<std::string>> DnsResolver::resolve(const std::string& name,
                                                             std::chrono::milliseconds timeout) {
  Lookup lookup;
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = ARES_AI_NOSORT;
  ares_getaddrinfo(state_->channel, name.c_str(), nullptr, &hints, on_addrinfo, &lookup);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (!lookup.done) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      timed_out = true;
      ares_cancel(state_->channel);  // calls on_addrinfo with ARES_ECANCELLED
      break;
    }
    fd_set read_fds, write_fds;
    FD_ZERO(&read_fds);
    FD_ZERO(&write_fds);
    const int nfds = ares_fds(state_->channel, &read_fds, &write_fds);
    const auto left_us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    timeval max_wait{static_cast<time_t>(left_us / 1000000), static_cast<suseconds_t>(left_us % 1000000)};
    timeval wait{};
    timeval* wait_for = ares_timeout(state_->channel, &max_wait, &wait);
    select(nfds, &read_fds, &write_fds, nullptr, wait_for);
    ares_process(state_->channel, &read_fds, &write_fds);
  }
  if (lookup.status == ARES_SUCCESS) {
    std::sort(lookup.addresses.begin(), lookup.addresses.end());
    lookup.addresses.erase(std::unique(lookup.addresses.begin(), lookup.addresses.end()), lookup.addresses.end());
    return lookup.addresses;
  }
  if (lookup.status == ARES_ENOTFOUND || lookup.status == ARES_ENODATA) return std::vector<std::string>{};
  last_error_ = name + ": " + (timed_out ? "no answer in time" : ares_strerror(lookup.status));
  return std::nullopt;
}

}  // namespace warp
