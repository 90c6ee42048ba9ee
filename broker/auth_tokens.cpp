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
  std::vector<std::pair<std::string, uint8_t>> tokens;
  std::istringstream in(content);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line);
    std::string token, scopes, extra;
    if (!(words >> token) || token[0] == '#') continue;
    uint8_t held = kRead;
    if (words >> scopes) {
      held = 0;
      for (size_t start = 0; start <= scopes.size();) {
        size_t comma = scopes.find(',', start);
        if (comma == std::string::npos) comma = scopes.size();
        const std::string scope = scopes.substr(start, comma - start);
        held |= scope == "read" ? kRead : scope == "write" ? kWrite : scope == "admin" ? (kRead | kWrite | kAdmin) : 0;
        if (scope != "read" && scope != "write" && scope != "admin") held |= 0x80;  // unknown
        start = comma + 1;
      }
    }
    if ((held & 0x80) != 0 || (words >> extra)) {
      std::fprintf(stderr,
                   "warp-broker: %s line %zu: scopes are read, write and admin, comma-separated; line left out\n",
                   path_.c_str(), number);
      continue;
    }
    tokens.emplace_back(std::move(token), held);
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

bool AuthTokens::allows(std::string_view authorization, Scope scope) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size() || authorization.substr(0, kScheme.size()) != kScheme) return false;
  const std::string_view token = authorization.substr(kScheme.size());
  std::lock_guard<std::mutex> lock(mutex_);
  reload_if_changed();
  bool found = false;
  for (const auto& [candidate, held] : tokens_) {
    found = (equal_in_constant_time(token, candidate) && ((held & scope) != 0 || (held & kAdmin) != 0)) || found;
  }
  return found;
}

size_t AuthTokens::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return tokens_.size();
}

}  // namespace warp
