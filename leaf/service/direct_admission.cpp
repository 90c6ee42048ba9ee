#include "leaf/service/direct_admission.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

namespace warp {

std::string_view DirectAdmission::name(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNone:
      return "none";
    case Refusal::kConnections:
      return "connections";
    case Refusal::kUnauthenticated:
      return "unauthenticated";
    case Refusal::kSource:
      return "source";
    case Refusal::kHandshakeRate:
      return "handshake_rate";
  }
  return "?";
}

DirectAdmission::Refusal DirectAdmission::admit(const std::string& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ >= limits_.connections) return Refusal::kConnections;
  if (secure_) {
    if (unauthenticated_ >= limits_.unauthenticated) return Refusal::kUnauthenticated;
    size_t& from = unauthenticated_by_source_[source];
    if (from >= limits_.unauthenticated_per_source) {
      if (from == 0) unauthenticated_by_source_.erase(source);
      return Refusal::kSource;
    }
    ++from;
    ++unauthenticated_;
  }
  ++open_;
  return Refusal::kNone;
}

void DirectAdmission::authenticated(const std::string& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!secure_) return;
  auto it = unauthenticated_by_source_.find(source);
  if (it == unauthenticated_by_source_.end()) return;
  if (--it->second == 0) unauthenticated_by_source_.erase(it);
  --unauthenticated_;
}

void DirectAdmission::closed(const std::string& source, bool was_authenticated) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ > 0) --open_;
  if (!secure_ || was_authenticated) return;
  auto it = unauthenticated_by_source_.find(source);
  if (it == unauthenticated_by_source_.end()) return;
  if (--it->second == 0) unauthenticated_by_source_.erase(it);
  --unauthenticated_;
}

void DirectAdmission::refill(Bucket& bucket, double rate, Clock::time_point now) {
  if (bucket.last == Clock::time_point{}) {
    bucket.tokens = rate;  // a second's worth to start with
  } else {
    const double seconds = std::chrono::duration<double>(now - bucket.last).count();
    bucket.tokens = std::min(rate, bucket.tokens + seconds * rate);
  }
  bucket.last = now;
}

bool DirectAdmission::handshake_allowed(const std::string& source, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_source_.size() > 4096 && !by_source_.count(source)) by_source_.clear();  // sources seen long ago
  Bucket& from = by_source_[source];
  refill(overall_, limits_.handshakes_per_second, now);
  refill(from, limits_.handshakes_per_source_per_second, now);
  if (overall_.tokens < 1 || from.tokens < 1) return false;
  overall_.tokens -= 1;
  from.tokens -= 1;
  return true;
}

size_t DirectAdmission::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

size_t DirectAdmission::unauthenticated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unauthenticated_;
}

size_t direct_connection_budget(size_t reserve) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1u << 16;
  size_t used = 0;
  if (DIR* fds = ::opendir("/proc/self/fd")) {
    while (::readdir(fds) != nullptr) ++used;
    ::closedir(fds);
  }
  const size_t cap = static_cast<size_t>(limit.rlim_cur);
  return std::max<size_t>(16, cap > used + reserve ? cap - used - reserve : 0);
}

}  // namespace warp
