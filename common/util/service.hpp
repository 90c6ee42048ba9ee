// What every Warpsearch executable's main shares: a clear one-line error and exit status 1 for an
// exception that reaches it, and SIGTERM/SIGINT turned into a flag the service loops watch.
#pragma once
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <thread>

namespace warp {

inline std::atomic<bool>& stop_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

extern "C" inline void warp_on_stop_signal(int) { stop_flag() = true; }

inline void install_stop_handlers() {
  std::signal(SIGTERM, warp_on_stop_signal);
  std::signal(SIGINT, warp_on_stop_signal);
}

inline bool stop_requested() { return stop_flag(); }

inline void wait_for_stop() {
  while (!stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// Runs `body` and turns an escaping exception into "NAME: message" on stderr and exit status 1.
template <class Body>
int run_main(const char* name, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace warp
