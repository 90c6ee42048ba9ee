#include "broker/auth_tokens.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "common/util/status.hpp"

namespace warp {
namespace {

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

}  // namespace

AuthTokens::AuthTokens(std::string path, bool keep_if_missing)
    : path_(std::move(path)), keep_if_missing_(keep_if_missing) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string content;
  if (!read(content)) throw Error("cannot read the token file " + path_ + ": no such file");
  load(content);
  next_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

bool AuthTokens::read(std::string& content) const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec) && !ec) return false;
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw Error("cannot read the token file " + path_);
  std::ostringstream text;
  text << in.rdbuf();
  content = text.str();
  return true;
}

void AuthTokens::load(const std::string& content) {
  std::vector<std::string> tokens;
  std::istringstream in(content);
  std::string line;
  while (std::getline(in, line)) {
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    tokens.push_back(line.substr(begin, end - begin + 1));
  }
  tokens_ = std::move(tokens);
  loaded_content_ = content;
  std::fprintf(stderr, "warp-broker: %zu bearer token(s) from %s\n", tokens_.size(), path_.c_str());
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    std::fprintf(stderr,
                 "warp-broker: warning: the token file %s is readable by group or others (mode %03o): chmod 600 it\n",
                 path_.c_str(), static_cast<unsigned>(st.st_mode & 0777));
  }
}

void AuthTokens::reload_if_changed() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return;
  next_check_ = now + std::chrono::seconds(1);
  try {
    std::string content;
    if (!read(content)) {
      if (!missing_ && !keep_if_missing_) {
        std::fprintf(stderr, "warp-broker: the token file %s is gone: no token is accepted until it is back\n",
                     path_.c_str());
        tokens_.clear();
        loaded_content_.clear();
      } else if (!missing_) {
        std::fprintf(stderr, "warp-broker: the token file %s is gone; keeping the tokens loaded before\n",
                     path_.c_str());
      }
      missing_ = true;
      return;
    }
    const bool was_missing = missing_;
    missing_ = false;
    if (content == loaded_content_ && !was_missing) return;
    load(content);
    reported_failure_ = false;
  } catch (const std::exception& e) {
    if (!reported_failure_) std::fprintf(stderr, "warp-broker: %s; keeping the tokens loaded before\n", e.what());
    reported_failure_ = true;
  }
}

bool AuthTokens::allows(std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size() || authorization.substr(0, kScheme.size()) != kScheme) return false;
  const std::string_view token = authorization.substr(kScheme.size());
  std::lock_guard<std::mutex> lock(mutex_);
  reload_if_changed();
  bool found = false;
  for (const std::string& candidate : tokens_) found = equal_in_constant_time(token, candidate) || found;
  return found;
}

size_t AuthTokens::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return tokens_.size();
}

}  // namespace warp
