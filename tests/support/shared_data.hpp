// Where ../shared/data is: WARP_SHARED_DATA (environment, e.g. on the GPU machine) or the path
// compiled in by CMake.
#pragma once
#include <cstdlib>
#include <string>

namespace warp::testing {

inline std::string shared_data_dir() {
  const char* override_dir = std::getenv("WARP_SHARED_DATA");
  return override_dir != nullptr ? override_dir : WARP_SHARED_DATA_DIR;
}

}  // namespace warp::testing
