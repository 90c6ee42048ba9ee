// Bearer tokens for the broker's search API (--auth-tokens FILE): one token per line, blank lines
// and lines starting with '#' ignored. The file is checked for changes at most once a second and
// reloaded, so tokens rotate without a restart: add the new token, move clients over, remove the
// old one. A file that cannot be read keeps the tokens loaded last (and says so once).
#pragma once
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace warp {

class AuthTokens {
 public:
  explicit AuthTokens(std::string path);  // throws Error if the file cannot be read at start
  // True when `authorization` is "Bearer <token>" for a listed token (compared in constant time).
  bool allows(std::string_view authorization);
  size_t size();

 private:
  void reload_if_changed();
  void load();

  std::string path_;
  std::mutex mutex_;
  std::vector<std::string> tokens_;
  std::filesystem::file_time_type loaded_mtime_{};
  std::chrono::steady_clock::time_point next_check_{};
  bool reported_failure_ = false;
};

}  // namespace warp
