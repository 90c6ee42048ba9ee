// Fresh random inputs each run, reproducible: the seed is printed and WARP_TEST_SEED replays it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace warp::testing {

inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* fixed = std::getenv("WARP_TEST_SEED");
    uint64_t s = fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
    std::printf("random seed %llu (replay with WARP_TEST_SEED=%llu)\n", static_cast<unsigned long long>(s),
                static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

}  // namespace warp::testing
