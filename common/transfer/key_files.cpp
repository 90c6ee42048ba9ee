#include "common/transfer/key_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/util/status.hpp"

namespace warp::transfer {

void write_new_file(const std::string& path, mode_t mode, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST)
      throw Error(path + " exists: keys are never overwritten (remove it first, or use another --out)");
    throw Error("cannot create " + path + ": " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace warp::transfer
