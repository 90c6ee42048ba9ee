#include "indexer/pipeline/run_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/util/status.hpp"

namespace warp::pipeline {
namespace {
constexpr uint64_t kSampleBytes = 64u << 10;
constexpr size_t kWriteBuffer = size_t{1} << 20;
}  // namespace

RunWriter::RunWriter(std::string path) : buffer_(new char[kWriteBuffer]) {
  info_.path = std::move(path);
  fd_ = ::open(info_.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create run file " + info_.path + ": " + std::strerror(errno));
}

RunWriter::~RunWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void RunWriter::flush() {
  for (size_t done = 0; done < used_;) {
    const ssize_t wrote = ::write(fd_, buffer_.get() + done, used_ - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0)
      throw Error("cannot write run file " + info_.path +
                  " (disk full?): " + std::strerror(wrote < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(wrote);
  }
  used_ = 0;
}

void RunWriter::write(const void* data, size_t size) {
  info_.bytes += size;
  const char* in = static_cast<const char*>(data);
  while (size > 0) {
    if (used_ == kWriteBuffer) flush();
    const size_t n = std::min(size, kWriteBuffer - used_);
    std::memcpy(buffer_.get() + used_, in, n);
    used_ += n, in += n, size -= n;
  }
}

void RunWriter::add(std::string_view term, std::span<const Posting> postings) {
  if (info_.bytes >= next_sample_) {
    info_.index.push_back({std::string(term), info_.bytes});
    next_sample_ = info_.bytes + kSampleBytes;
  }
  const uint32_t term_bytes = static_cast<uint32_t>(term.size());
  const uint32_t count = static_cast<uint32_t>(postings.size());
  write(&term_bytes, 4);
  write(term.data(), term.size());
  write(&count, 4);
  static_assert(sizeof(Posting) == 8);
  write(postings.data(), postings.size() * sizeof(Posting));
}

RunInfo RunWriter::finish() {
  flush();
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw Error("cannot write run file " + info_.path + " (disk full?): " + std::strerror(errno));
  return std::move(info_);
}

RunCursor::RunCursor(const RunInfo& run, std::string_view from, size_t buffer_bytes, const std::string* to)
    : run_(run) {
  fd_ = ::open(run.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open run file " + run.path + ": " + std::strerror(errno));
  // The last sample before `from`: every record before it holds a smaller term.
  const auto before = [](const RunIndexEntry& entry, std::string_view term) { return entry.term < term; };
  auto after = std::lower_bound(run.index.begin(), run.index.end(), from, before);
  offset_ = after == run.index.begin() ? 0 : std::prev(after)->offset;
  // Every record below `to` ends by the first sample at or past it; the slack holds the header of
  // the record that stops the caller (a longer one only takes one more read).
  uint64_t end = run.bytes;
  if (to != nullptr) {
    const auto stop = std::lower_bound(after, run.index.end(), std::string_view(*to), before);
    if (stop != run.index.end()) end = stop->offset;
  }
  constexpr uint64_t kSlack = 4096;
  capacity_ = static_cast<size_t>(
      std::clamp<uint64_t>(end - std::min(end, offset_) + kSlack, 4096, std::max<size_t>(buffer_bytes, 4096)));
  buffer_.reset(new char[capacity_]);  // not value-initialized: pread fills what is read
  while (next_header() && term_ < from) skip(uint64_t{count_} * sizeof(Posting));
}

RunCursor::~RunCursor() {
  if (fd_ >= 0) ::close(fd_);
}

void RunCursor::read(void* data, size_t size) {
  char* out = static_cast<char*>(data);
  while (size > 0) {
    if (position_ == filled_) {
      const ssize_t got = ::pread(fd_, buffer_.get(), capacity_, static_cast<off_t>(offset_));
      if (got <= 0) throw Error("run file " + run_.path + " is truncated");
      position_ = 0, filled_ = static_cast<size_t>(got), offset_ += filled_;
    }
    const size_t take = std::min(size, filled_ - position_);
    std::memcpy(out, buffer_.get() + position_, take);
    position_ += take, out += take, size -= take;
  }
}

void RunCursor::skip(uint64_t size) {
  const uint64_t in_buffer = std::min<uint64_t>(size, filled_ - position_);
  position_ += in_buffer, size -= in_buffer;
  if (size > 0) offset_ += size, position_ = filled_ = 0;  // past the buffer: read from there
}

bool RunCursor::next_header() {
  if (position_ == filled_ && offset_ >= run_.bytes) return valid_ = false;
  // The whole header in the buffer (nearly always): read in place, not by three copies (at 16
  // threads every term is a record in each of 16 or more runs).
  if (filled_ - position_ >= 8) {
    const char* at = buffer_.get() + position_;
    uint32_t term_bytes = 0;
    std::memcpy(&term_bytes, at, 4);
    if (filled_ - position_ >= size_t{8} + term_bytes) {
      term_.assign(at + 4, term_bytes);
      std::memcpy(&count_, at + 4 + term_bytes, 4);
      position_ += size_t{8} + term_bytes;
      return valid_ = true;
    }
  }
  uint32_t term_bytes = 0;
  read(&term_bytes, 4);
  term_.resize(term_bytes);
  read(term_.data(), term_bytes);
  read(&count_, 4);
  return valid_ = true;
}

void RunCursor::take(std::vector<Posting>& out) {
  const size_t at = out.size();
  out.resize(at + count_);
  read(out.data() + at, size_t{count_} * sizeof(Posting));
  next_header();
}

}  // namespace warp::pipeline
