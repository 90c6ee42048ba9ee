// UTF-8 decoding and encoding. Invalid sequences decode to U+FFFD, never a crash.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace warp {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at text[pos] and advances pos past it (by at least one byte).
// Overlong forms, surrogates, values above U+10FFFF and truncated sequences give U+FFFD.
char32_t utf8_next(std::string_view text, size_t& pos);

void utf8_append(std::string& out, char32_t cp);
// Writes cp's 1-4 bytes at out[at]; returns the offset after them.
size_t utf8_write(char* out, size_t at, char32_t cp);

// Replaces every invalid sequence by U+FFFD; valid text comes back unchanged.
std::string utf8_sanitize(std::string_view text);
bool utf8_valid(std::string_view text);

}  // namespace warp
