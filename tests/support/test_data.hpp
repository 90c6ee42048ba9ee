// Where the judged test collections are (tests/data: Cranfield, CISI): WARP_TEST_DATA (environment,
// e.g. on a GPU host where the tree lives elsewhere) or the path compiled in by CMake.
#pragma once
#include <cstdlib>
#include <string>

namespace warp::testing {

inline std::string test_data_dir() {
  const char* override_dir = std::getenv("WARP_TEST_DATA");
  return override_dir != nullptr ? override_dir : WARP_TEST_DATA_DIR;
}

}  // namespace warp::testing
