// Markup to text for TREC and WARC documents: tags removed (with script and style content),
// common character entities decoded, whitespace runs collapsed, invalid UTF-8 replaced.
#pragma once
#include <string>
#include <string_view>

namespace warp {

std::string markup_to_text(std::string_view markup);
// The text inside the first <tag>…</tag> (case-insensitive), empty if absent.
std::string first_element_text(std::string_view markup, std::string_view tag);
// The markup inside the first <tag>…</tag>, or all of it when there is no such element.
std::string_view element_or_all(std::string_view markup, std::string_view tag);
// `markup` without its first <tag>…</tag> element.
std::string without_element(std::string_view markup, std::string_view tag);

}  // namespace warp
