#include "indexer/reader/input_source.hpp"

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "common/util/status.hpp"

namespace warp {

namespace {
constexpr size_t kMinChunk = 4u << 10, kMaxChunk = 256u << 10;
}

// Buffers sized by the file: a small file costs a few KiB, not 1 MiB of zeroed buffers (zlib's
// gzbuffer and ours); a large one reaches 256 KiB reads after a few doublings (zlib holds twice
// that; a parallel build has one source open per parser).
InputSource::InputSource(const std::string& path) : path_(path) { open_whole(); }

void InputSource::open_whole() {
  const std::string& path = path_;
  std::error_code error;
  const uintmax_t disk_bytes = std::filesystem::file_size(path, error);
  chunk_ =
      error ? kMaxChunk
            : std::clamp<size_t>(static_cast<size_t>(std::min<uintmax_t>(disk_bytes, kMaxChunk)), kMinChunk, kMaxChunk);
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) throw Error("input " + path + ": cannot open");
  gzbuffer(file_, static_cast<unsigned>(chunk_));
}

InputSource::InputSource(const std::string& path, uint64_t begin) : path_(path) {
  if (begin == 0) {
    open_whole();
    return;
  }
  chunk_ = kMinChunk;  // a piece of a file may be small: start small, double
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("input " + path + ": cannot open");
  // From the byte before `begin`: the rest of the line it ends, possibly just its '\n', is skipped.
  if (::lseek(fd, static_cast<off_t>(begin - 1), SEEK_SET) < 0 || (file_ = gzdopen(fd, "rb")) == nullptr) {
    ::close(fd);
    throw Error("input " + path + ": cannot read from byte " + std::to_string(begin));
  }
  gzbuffer(file_, static_cast<unsigned>(chunk_));
  offset_ = begin - 1;
  std::string partial;
  read_line(partial);
  line_number_ = 0;
}

InputSource::~InputSource() {
  if (file_ != nullptr) gzclose(file_);
}

bool InputSource::fill() {
  if (eof_) return false;
  buffer_.erase(0, position_);
  position_ = 0;
  const size_t old = buffer_.size();
  buffer_.resize(old + chunk_);
  const int got = gzread(file_, buffer_.data() + old, static_cast<unsigned>(chunk_));
  chunk_ = std::min(chunk_ * 2, kMaxChunk);  // gzip expands: later reads may need more
  if (got < 0) {
    int code = 0;
    const char* message = gzerror(file_, &code);
    throw Error("input " + path_ + ": read error at byte " + std::to_string(offset_) + ": " + message);
  }
  buffer_.resize(old + static_cast<size_t>(got));
  if (got == 0) eof_ = true;
  return got > 0;
}

bool InputSource::read_line(std::string& line) {
  line_start_ = offset_;
  for (;;) {
    const size_t newline = buffer_.find('\n', position_);
    if (newline != std::string::npos) {
      line.assign(buffer_, position_, newline - position_);
      offset_ += newline - position_ + 1;
      position_ = newline + 1;
      break;
    }
    if (!fill()) {
      if (position_ >= buffer_.size()) return false;
      line.assign(buffer_, position_, std::string::npos);  // last line without '\n'
      offset_ += buffer_.size() - position_;
      position_ = buffer_.size();
      break;
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_number_;
  return true;
}

size_t InputSource::read_bytes(size_t n, std::string& out) {
  size_t done = 0;
  while (done < n) {
    if (position_ >= buffer_.size() && !fill()) break;
    const size_t take = std::min(n - done, buffer_.size() - position_);
    out.append(buffer_, position_, take);
    position_ += take;
    offset_ += take;
    done += take;
  }
  return done;
}

}  // namespace warp
