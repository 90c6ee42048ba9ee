#include "broker/auth_tokens.hpp"

#include <cstdio>
#include <fstream>

#include "common/util/status.hpp"

namespace warp {
namespace {

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

}  // namespace

AuthTokens::AuthTokens(std::string path) : path_(std::move(path)) {
  std::lock_guard<std::mutex> lock(mutex_);
  load();
  next_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

void AuthTokens::load() {
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path_, ec);
  std::ifstream in(path_);
  if (ec || !in) throw Error("cannot read the token file " + path_);
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    tokens.push_back(line.substr(begin, end - begin + 1));
  }
  tokens_ = std::move(tokens);
  loaded_mtime_ = mtime;
  std::fprintf(stderr, "warp-broker: %zu bearer token(s) from %s\n", tokens_.size(), path_.c_str());
}

void AuthTokens::reload_if_changed() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return;
  next_check_ = now + std::chrono::seconds(1);
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path_, ec);
  if (!ec && mtime == loaded_mtime_) return;
  try {
    load();
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
