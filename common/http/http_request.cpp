// Request parsing shared by the HTTP server and its tests: host:port flags, percent-decoding,
// the query string.
#include <string>

#include "common/http/http_server.hpp"
#include "common/util/status.hpp"

namespace warp::http {

std::pair<std::string, uint16_t> parse_host_port(const std::string& text, const std::string& flag) {
  const size_t colon = text.rfind(':');
  unsigned long port = 0;
  try {
    if (colon == std::string::npos || colon == 0) throw Error("");
    size_t used = 0;
    port = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port > 65535) throw Error("");
  } catch (...) {
    throw Error(flag + " expects HOST:PORT, got '" + text + "'");
  }
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

void parse_target(Request& request) {
  // The absolute form ("http://host:port/path?query", which a server must accept, RFC 9112 §3.2.2):
  // the path and query after the authority.
  size_t begin = 0;
  if (const size_t scheme = request.target.find("://"); scheme != std::string::npos && request.target.front() != '/') {
    begin = request.target.find_first_of("/?", scheme + 3);
    if (begin == std::string::npos) begin = request.target.size();
  }
  const size_t question = request.target.find('?', begin);
  request.path = request.target.substr(begin, question == std::string::npos ? std::string::npos : question - begin);
  if (request.path.empty()) request.path = "/";
  request.query.clear();
  request.query_ok = true;
  if (question == std::string::npos) return;
  std::string_view query = std::string_view(request.target).substr(question + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!url_decode(pair.substr(0, eq), key) ||
        (eq != std::string_view::npos && !url_decode(pair.substr(eq + 1), value))) {
      request.query_ok = false;
    } else if (!key.empty()) {
      request.query.emplace(key, value);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

}  // namespace warp::http
