// Bearer tokens for the broker's search API (--auth-tokens FILE): one token per line, blank lines
// and lines starting with '#' ignored. A token may be followed by its scopes, comma-separated:
// `read` (searches; what a token without scopes has), `write` (the write API's puts and deletes),
// `admin` (everything); a line with an unknown scope is left out, with a log line. The file is checked at most once a
// second and reloaded when its content changed (not only its modification time), so tokens rotate without a restart:
// add the new token, move clients over, remove the old one. Fails closed: a file that is gone accepts no token until it
// is back (unless `keep_if_missing`), with a log line; a file that exists but cannot be read keeps the tokens loaded
// last. A file readable by group or others is warned about.
#pragma once
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace warp {

class AuthTokens {
 public:
  // Throws Error if the file cannot be read at start.
  explicit AuthTokens(std::string path, bool keep_if_missing = false);
  enum Scope : uint8_t { kRead = 1, kWrite = 2, kAdmin = 4 };
  // True when `authorization` is "Bearer <token>" for a listed token (compared in constant time)
  // that holds `scope` (admin holds every scope).
  bool allows(std::string_view authorization, Scope scope = kRead);
  size_t size();

 private:
  void reload_if_changed();
  // Reads the file; false when it is gone (nothing changed), throws Error when it cannot be read.
  bool read(std::string& content) const;
  void load(const std::string& content);

  std::string path_;
  bool keep_if_missing_ = false;
  std::string loaded_content_;
  bool missing_ = false;
  std::mutex mutex_;
  std::vector<std::pair<std::string, uint8_t>> tokens_;  // token, its scopes
  std::chrono::steady_clock::time_point next_check_{};
  bool reported_failure_ = false;
};

}  // namespace warp
