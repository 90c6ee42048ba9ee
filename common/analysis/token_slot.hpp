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
  // Whether the slot holds `token` (its tag already compared).
  bool holds(std::string_view token, const char* texts) const {
    if (token.size() <= kInlineBytes) return size == token.size() && std::memcmp(text, token.data(), token.size()) == 0;
    return size == kLong && this->token(texts) == token;
  }
};
static_assert(sizeof(TokenSlot) == 32);

}  // namespace warp
