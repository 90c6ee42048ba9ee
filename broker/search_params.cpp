#include "broker/search_params.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace warp {
namespace {

constexpr const char* kSearchParams =
    "q, k, offset, mode, syntax, after, source, snippet, snippet_length, highlight, highlight_pre, highlight_post, "
    "filter, facets, facet_size";

// A whole number of at most `digits` digits; nullopt when the text is not one.
std::optional<uint64_t> text_number(const std::string& text, size_t digits) {
  if (text.empty() || text.size() > digits ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoull(text);
}

std::optional<bool> text_bool(const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::nullopt;
}

// One parameter's value: a GET's text, or a POST's JSON value.
struct Value {
  const std::string* text = nullptr;
  const nlohmann::json* json = nullptr;
  std::optional<std::string> string() const {
    if (text) return *text;
    if (json->is_string()) return json->get<std::string>();
    return std::nullopt;
  }
  std::optional<uint64_t> number(size_t digits) const {
    if (text) return text_number(*text, digits);
    if (json->is_number_unsigned()) return json->get<uint64_t>();
    if (json->is_number_integer() && json->get<int64_t>() >= 0) return static_cast<uint64_t>(json->get<int64_t>());
    return std::nullopt;
  }
  std::optional<bool> boolean() const {
    if (text) return text_bool(*text);
    if (json->is_boolean()) return json->get<bool>();
    return std::nullopt;
  }
};

// Sets parameter `name` of `params`; the reason it is refused, if it is.
std::optional<std::string> set_param(const std::string& name, const Value& value, size_t max_k, SearchParams& params) {
  const auto string_param = [&](std::string& out, size_t most) -> std::optional<std::string> {
    const std::optional<std::string> text = value.string();
    if (!text) return name + " must be a string";
    if (text->size() > most) return name + " must be at most " + std::to_string(most) + " bytes";
    out = *text;
    return std::nullopt;
  };
  if (name == "q") return string_param(params.q, SIZE_MAX);
  if (name == "mode") return string_param(params.mode, 16);
  if (name == "syntax") {
    const std::optional<std::string> text = value.string();
    if (!text || (*text != "query" && *text != "plain")) return std::string("syntax must be query or plain");
    params.syntax = *text == "query";
    return std::nullopt;
  }
  if (name == "k" || name == "offset" || name == "snippet_length") {
    const bool is_k = name == "k", is_length = name == "snippet_length";
    const size_t least = is_k || is_length ? 1 : 0;
    const size_t most = is_length ? kMaxSnippetLength : is_k ? max_k : max_k - 1;
    const std::optional<uint64_t> count = value.number(9);
    if (!count || *count < least || *count > most)
      return name + " must be an integer from " + std::to_string(least) + " to " + std::to_string(most);
    (is_k ? params.k : is_length ? params.snippet_length : params.offset) = *count;
    return std::nullopt;
  }
  if (name == "after") {
    const std::optional<uint64_t> sequence = value.number(19);
    if (!sequence) return "after must be a write's sequence, a whole number";
    params.after = *sequence;
    return std::nullopt;
  }
  if (name == "source") {
    const std::optional<bool> on = value.boolean();
    if (!on) return "source must be true or false";
    params.source = *on;
    return std::nullopt;
  }
  if (name == "snippet") return string_param(params.snippet, 256);
  if (name == "highlight") {  // false: snippets without tags
    const std::optional<bool> on = value.boolean();
    if (!on) return "highlight must be true or false";
    if (!*on) params.highlight_pre.clear(), params.highlight_post.clear();
    return std::nullopt;
  }
  // A POST's array of strings, or one string (split at commas with `commas`); nullopt: neither.
  const auto strings = [&](bool commas) -> std::optional<std::vector<std::string>> {
    std::vector<std::string> out;
    if (value.json && value.json->is_array()) {
      for (const nlohmann::json& one : *value.json) {
        if (!one.is_string()) return std::nullopt;
        out.push_back(one.get<std::string>());
      }
      return out;
    }
    const std::optional<std::string> text = value.string();
    if (!text) return std::nullopt;
    for (size_t at = 0; commas && at <= text->size();) {
      const size_t comma = std::min(text->find(',', at), text->size());
      out.push_back(text->substr(at, comma - at));
      at = comma + 1;
    }
    if (!commas) out.push_back(*text);
    return out;
  };
  if (name == "filter") {  // repeatable (GET), or an array (POST): joined with AND
    std::optional<std::vector<std::string>> texts = strings(false);
    if (!texts) return std::string("filter must be a string or an array of strings");
    for (std::string& text : *texts) {
      if (text.size() > kMaxFilterBytes)
        return "a filter must be at most " + std::to_string(kMaxFilterBytes) + " bytes";
      params.filters.push_back(std::move(text));
    }
    if (params.filters.size() > kMaxFilters) return "at most " + std::to_string(kMaxFilters) + " filters a search";
    return std::nullopt;
  }
  if (name == "facets") {  // comma-separated (GET), or an array (POST)
    const std::optional<std::vector<std::string>> fields = strings(true);
    if (!fields) return std::string("facets must be a comma-separated string or an array of strings");
    for (const std::string& field : *fields) {
      if (field.empty() || field.size() > 64) return std::string("facets: a field name of 1 to 64 bytes");
      if (std::find(params.facets.begin(), params.facets.end(), field) == params.facets.end())
        params.facets.push_back(field);
    }
    if (params.facets.size() > kMaxFacets) return "at most " + std::to_string(kMaxFacets) + " facet fields a search";
    return std::nullopt;
  }
  if (name == "facet_size") {
    const std::optional<uint64_t> count = value.number(9);
    if (!count || *count < 1 || *count > kMaxFacetSize)
      return "facet_size must be an integer from 1 to " + std::to_string(kMaxFacetSize);
    params.facet_size = *count;
    return std::nullopt;
  }
  if (name == "highlight_pre") return string_param(params.highlight_pre, kMaxHighlightTagBytes);
  if (name == "highlight_post") return string_param(params.highlight_post, kMaxHighlightTagBytes);
  return "unknown parameter '" + name + "' (accepted: " + kSearchParams + ")";
}

}  // namespace

http::Response json_error(int status, const std::string& message) {
  return {status, "application/json",
          nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

std::optional<http::Response> read_search_params(const http::Request& request, size_t max_k, SearchParams& params) {
  if (request.method == "GET") {
    if (!request.query_ok) return json_error(400, "malformed query string (bad percent-encoding)");
    for (const auto& [name, value] : request.query) {
      if (auto why = set_param(name, Value{&value, nullptr}, max_k, params)) return json_error(400, *why);
    }
  } else {
    nlohmann::json body;
    try {
      body = nlohmann::json::parse(request.body);
    } catch (const nlohmann::json::exception&) {
      return json_error(400, "the body is not valid JSON");
    }
    if (!body.is_object() || !body.contains("q") || !body["q"].is_string())
      return json_error(400, "the body needs a string \"q\"");
    for (const auto& [name, value] : body.items()) {
      if (auto why = set_param(name, Value{nullptr, &value}, max_k, params)) {
        // As before: a POST names its fields in quotes.
        if (why->rfind("unknown parameter", 0) == 0)
          return json_error(400, "unknown field \"" + name + "\" (accepted: " + kSearchParams + ")");
        return json_error(400, *why);
      }
    }
  }
  if (params.offset + params.k > max_k) {
    return json_error(400, "offset + k must be at most " + std::to_string(max_k) +
                               " (--max-k): a page that deep costs every leaf offset + k hits");
  }
  return std::nullopt;
}

}  // namespace warp
