// Key files: created with their final mode from the start (never chmod'ed after writing, so a
// secret key is never readable by others, whatever the umask), and never overwritten in place.
#pragma once
#include <sys/types.h>

#include <string>

namespace warp::transfer {

// Creates `path` with `mode` and `text`, flushed to disk; throws Error, writing nothing, if it exists.
void write_new_file(const std::string& path, mode_t mode, const std::string& text);

}  // namespace warp::transfer
