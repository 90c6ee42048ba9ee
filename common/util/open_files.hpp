// The process's open-file limit: services raise the soft limit to the hard one at start, so that
// connections (a broker's HTTP clients, a leaf's direct search path) and a generation's files have
// the room the system allows rather than the shell's default (often 1,024).
#pragma once
#include <cstdint>

namespace warp {

// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the soft limit in force after.
uint64_t raise_open_file_limit();

}  // namespace warp
