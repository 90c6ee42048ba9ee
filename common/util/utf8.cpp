#include "common/util/utf8.hpp"

namespace warp {

char32_t utf8_next(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  size_t extra;
  char32_t cp;
  char32_t min_value;
  if ((lead & 0xE0) == 0xC0) {
    extra = 1, cp = lead & 0x1F, min_value = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, cp = lead & 0x0F, min_value = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, cp = lead & 0x07, min_value = 0x10000;
  } else {
    ++pos;  // stray continuation byte or invalid lead
    return kReplacementChar;
  }
  size_t i = 1;
  for (; i <= extra; ++i) {
    if (pos + i >= text.size() || (byte(pos + i) & 0xC0) != 0x80) break;
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  if (i <= extra) {  // truncated: consume the valid prefix only
    pos += i;
    return kReplacementChar;
  }
  pos += extra + 1;
  if (cp < min_value || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kReplacementChar;
  return cp;
}

size_t utf8_write(char* out, size_t at, char32_t cp) {
  if (cp < 0x80) {
    out[at++] = static_cast<char>(cp);
  } else if (cp < 0x800) {
    out[at++] = static_cast<char>(0xC0 | (cp >> 6));
    out[at++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out[at++] = static_cast<char>(0xE0 | (cp >> 12));
    out[at++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[at++] = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out[at++] = static_cast<char>(0xF0 | (cp >> 18));
    out[at++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out[at++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[at++] = static_cast<char>(0x80 | (cp & 0x3F));
  }
  return at;
}

void utf8_append(std::string& out, char32_t cp) {
  char bytes[4];
  out.append(bytes, utf8_write(bytes, 0, cp));
}

bool utf8_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = utf8_next(text, pos);
    // A literal U+FFFD in the input is valid (3 bytes); a replacement from a bad sequence is not.
    if (cp == kReplacementChar && pos - start != 3) return false;
    if (cp == kReplacementChar && text.substr(start, 3) != "\xEF\xBF\xBD") return false;
  }
  return true;
}

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) utf8_append(out, utf8_next(text, pos));
  return out;
}

}  // namespace warp
