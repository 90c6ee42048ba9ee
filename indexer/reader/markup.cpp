#include "indexer/reader/markup.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/util/utf8.hpp"

namespace warp {
namespace {

bool starts_with_ci(std::string_view text, size_t at, std::string_view prefix) {
  if (at + prefix.size() > text.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[at + i])) != prefix[i]) return false;
  }
  return true;
}

size_t find_ci(std::string_view text, std::string_view needle, size_t from) {
  for (size_t i = from; i + needle.size() <= text.size(); ++i) {
    if (starts_with_ci(text, i, needle)) return i;
  }
  return std::string_view::npos;
}

void append_entity(std::string_view entity, std::string& out) {
  if (entity == "amp")
    out += '&';
  else if (entity == "lt")
    out += '<';
  else if (entity == "gt")
    out += '>';
  else if (entity == "quot")
    out += '"';
  else if (entity == "apos")
    out += '\'';
  else if (entity == "nbsp")
    out += ' ';
  else if (entity.size() > 1 && entity[0] == '#') {
    const bool hex = entity[1] == 'x' || entity[1] == 'X';
    const long cp = std::strtol(std::string(entity.substr(hex ? 2 : 1)).c_str(), nullptr, hex ? 16 : 10);
    if (cp > 0 && cp <= 0x10FFFF)
      utf8_append(out, static_cast<char32_t>(cp));
    else
      out += ' ';
  } else {
    out += ' ';
  }
}

}  // namespace

std::string markup_to_text(std::string_view markup) {
  std::string out;
  out.reserve(markup.size());
  size_t i = 0;
  while (i < markup.size()) {
    const char c = markup[i];
    if (c == '<') {
      for (std::string_view skip : {"script", "style"}) {  // drop their content too
        if (starts_with_ci(markup, i + 1, skip)) {
          const size_t end = find_ci(markup, std::string("</") + std::string(skip), i);
          i = end == std::string_view::npos ? markup.size() : end;
          break;
        }
      }
      const size_t close = markup.find('>', i);
      i = close == std::string_view::npos ? markup.size() : close + 1;
      out += ' ';
    } else if (c == '&') {
      const size_t semicolon = markup.find(';', i);
      if (semicolon != std::string_view::npos && semicolon - i <= 10) {
        append_entity(markup.substr(i + 1, semicolon - i - 1), out);
        i = semicolon + 1;
      } else {
        out += c;
        ++i;
      }
    } else {
      out += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
      ++i;
    }
  }
  std::string collapsed;
  collapsed.reserve(out.size());
  for (char ch : out) {
    if (ch == ' ' && (collapsed.empty() || collapsed.back() == ' ')) continue;
    collapsed += ch;
  }
  while (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
  return utf8_valid(collapsed) ? collapsed : utf8_sanitize(collapsed);
}

namespace {

struct Element {
  size_t start = std::string_view::npos;  // of "<tag"
  size_t content = 0;                     // first byte after '>'
  size_t content_end = 0;                 // of "</tag"
  size_t end = 0;                         // past "</tag>"
};

Element find_element(std::string_view markup, std::string_view tag) {
  const std::string open = "<" + std::string(tag), close = "</" + std::string(tag);
  Element e;
  size_t start = find_ci(markup, open, 0);
  while (start != std::string_view::npos) {
    const char after = start + open.size() < markup.size() ? markup[start + open.size()] : '\0';
    if (after == '>' || std::isspace(static_cast<unsigned char>(after))) break;
    start = find_ci(markup, open, start + 1);
  }
  if (start == std::string_view::npos) return e;
  const size_t gt = markup.find('>', start);
  if (gt == std::string_view::npos) return e;
  e.start = start;
  e.content = gt + 1;
  const size_t close_at = find_ci(markup, close, e.content);
  e.content_end = close_at == std::string_view::npos ? markup.size() : close_at;
  const size_t close_gt = close_at == std::string_view::npos ? std::string_view::npos : markup.find('>', close_at);
  e.end = close_gt == std::string_view::npos ? markup.size() : close_gt + 1;
  return e;
}

}  // namespace

std::string first_element_text(std::string_view markup, std::string_view tag) {
  const Element e = find_element(markup, tag);
  if (e.start == std::string_view::npos) return {};
  return markup_to_text(markup.substr(e.content, e.content_end - e.content));
}

std::string_view element_or_all(std::string_view markup, std::string_view tag) {
  const Element e = find_element(markup, tag);
  if (e.start == std::string_view::npos) return markup;
  return markup.substr(e.content, e.content_end - e.content);
}

std::string without_element(std::string_view markup, std::string_view tag) {
  const Element e = find_element(markup, tag);
  if (e.start == std::string_view::npos) return std::string(markup);
  return std::string(markup.substr(0, e.start)) + " " + std::string(markup.substr(e.end));
}

}  // namespace warp
