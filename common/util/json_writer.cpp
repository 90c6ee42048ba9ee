#include "common/util/json_writer.hpp"

#include <charconv>
#include <cmath>

#include "common/util/utf8.hpp"

namespace warp {

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    // A run of bytes that need no escape, appended at once (titles are mostly such: a byte at a
    // time was 6% of the broker's CPU under load).
    size_t run = pos;
    while (run < text.size()) {
      const unsigned char b = static_cast<unsigned char>(text[run]);
      if (b < 0x20 || b == '"' || b == '\\' || b >= 0x80) break;
      ++run;
    }
    out.append(text.data() + pos, run - pos);
    pos = run;
    if (pos == text.size()) break;
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c >= 0x80) {  // a multi-byte sequence: copied if valid, else U+FFFD
      const size_t start = pos;
      const char32_t cp = utf8_next(text, pos);
      if (cp == kReplacementChar && text.substr(start, pos - start) != "\xEF\xBF\xBD") {
        utf8_append(out, kReplacementChar);
      } else {
        out.append(text.substr(start, pos - start));
      }
      continue;
    }
    ++pos;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void JsonWriter::separate() {
  if (!first_) out_ += ',';
  first_ = false;
}

JsonWriter& JsonWriter::open(char bracket) {
  separate();
  out_ += bracket;
  first_ = true;
  return *this;
}

JsonWriter& JsonWriter::close(char bracket) {
  out_ += bracket;
  first_ = false;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  separate();
  append_json_string(out_, name);
  out_ += ':';
  first_ = true;  // the value that follows takes no comma
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  separate();
  append_json_string(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  separate();
  if (!std::isfinite(number)) return out_ += "null", *this;
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, number);
  out_.append(buffer, end);
  return *this;
}

template <class Number>
JsonWriter& JsonWriter::integer(Number number) {
  separate();
  char buffer[24];
  out_.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, number).ptr);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t number) { return integer(number); }
JsonWriter& JsonWriter::value(uint64_t number) { return integer(number); }

JsonWriter& JsonWriter::value(bool truth) {
  separate();
  out_ += truth ? "true" : "false";
  return *this;
}

}  // namespace warp
