// libFuzzer: documents as the write API checks them (broker/document_api.hpp's check_document), one
// per input line, each with and without an id from the path. A document taken must be written again
// as one JSON object line holding every field of the input (id the path's where one is given),
// id, title, body and url strings, a non-empty id of at most 512 bytes, within the size limit; a
// refused one must say why with 400 or 413.
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "broker/document_api.hpp"

namespace {

void check(std::string_view line, const std::string& path_id) {
  constexpr size_t kMax = 4096;
  const warp::CheckedDocument checked = warp::check_document(line, path_id, kMax);
  if (!checked.error.empty()) {
    if (checked.status != 400 && checked.status != 413) std::abort();
    if (checked.status == 413 && line.size() <= kMax) std::abort();
    return;
  }
  if (line.size() > kMax || checked.id.empty() || checked.id.size() > 512) std::abort();
  if (!path_id.empty() && checked.id != path_id) std::abort();
  if (checked.line.find('\n') != std::string::npos) std::abort();  // one line of the log's JSONL
  const nlohmann::json doc = nlohmann::json::parse(checked.line, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || doc["id"] != checked.id) std::abort();
  const nlohmann::json input = nlohmann::json::parse(line, nullptr, false);
  for (const auto& [key, value] : doc.items()) {
    const bool indexed = key == "id" || key == "title" || key == "body" || key == "url";
    if (indexed && !value.is_string()) std::abort();
    if (key != "id" && (!input.contains(key) || input[key] != value)) std::abort();  // kept as given
  }
  for (const auto& [key, value] : input.items())
    if (!doc.contains(key)) std::abort();  // nothing dropped
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0; at <= input.size();) {
    size_t end = input.find('\n', at);
    if (end == std::string::npos) end = input.size();
    const std::string_view line(input.data() + at, end - at);
    check(line, "");
    check(line, "path-id");
    at = end + 1;
  }
  return 0;
}
