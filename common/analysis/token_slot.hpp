// A stem cache's token slot (StemCache, SharedStemCache): 32 bytes holding a hash tag, the token's
// stem id and the token itself when it fits (23 bytes: nearly every word), so a lookup reads one
// cache line. A longer token has size kLong and its offset and length in its cache's text area.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace warp {

struct alignas(32) TokenSlot {
  static constexpr size_t kInlineBytes = 23;
  static constexpr uint8_t kLong = 0xFF;

  uint32_t tag;  // never 0 (an empty slot) nor even (SharedStemCache's busy mark): see tag_of
  uint32_t stem;
  uint8_t size;
  char text[kInlineBytes];

  static uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }

  // Stores the token: inline, or as `text_offset` (where the caller put its text) and its length.
  void set_token(std::string_view token, uint32_t text_offset) {
    if (token.size() <= kInlineBytes) {
      size = static_cast<uint8_t>(token.size());
      std::memcpy(text, token.data(), token.size());
      return;
    }
    const auto length = static_cast<uint32_t>(token.size());
    size = kLong;
    std::memcpy(text, &text_offset, 4);
    std::memcpy(text + 4, &length, 4);
  }
  // The token's text; `texts` is the cache's text area, for a long one.
  std::string_view token(const char* texts) const {
    if (size != kLong) return {text, size};
    uint32_t offset, length;
    std::memcpy(&offset, text, 4);
    std::memcpy(&length, text + 4, 4);
    return {texts + offset, length};
  }
  // Whether the slot holds `token` (its tag already compared). The inline case compares in place:
  // a call to libc's memcmp for every token looked up had been 12% of a one-thread build on the
  // GPU machine (its glibc's memcmp, reached through the PLT, with a branch on the size).
  bool holds(std::string_view token, const char* texts) const {
    if (token.size() <= kInlineBytes) return size == token.size() && equal_short(text, token.data(), token.size());
    return size == kLong && this->token(texts) == token;
  }

  // a[0, n) == b[0, n) for n <= 23, in at most three overlapping 8-byte loads a side (or two of 4,
  // or bytes), none past either end.
  static bool equal_short(const char* a, const char* b, size_t n) {
    const auto load8 = [](const char* p) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    };
    const auto load4 = [](const char* p) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    };
    if (n >= 8) {
      uint64_t diff = (load8(a) ^ load8(b)) | (load8(a + n - 8) ^ load8(b + n - 8));
      if (n > 16) diff |= load8(a + 8) ^ load8(b + 8);
      return diff == 0;
    }
    if (n >= 4) return ((load4(a) ^ load4(b)) | (load4(a + n - 4) ^ load4(b + n - 4))) == 0;
    bool equal = true;
    for (size_t i = 0; i < n; ++i) equal &= a[i] == b[i];
    return equal;
  }
};
static_assert(sizeof(TokenSlot) == 32);

}  // namespace warp
