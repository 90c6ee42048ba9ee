#include "common/index/stored_source.hpp"

#include <nlohmann/json.hpp>

#include "common/util/json_writer.hpp"

namespace warp {

std::string stored_source(const SourceDocument& doc) {
  if (!doc.source.empty()) return doc.source;
  JsonWriter json;
  json.begin_object().key("id").value(doc.external_id);
  if (!doc.title.empty()) json.key("title").value(doc.title);
  if (!doc.url.empty()) json.key("url").value(doc.url);
  json.key("body").value(doc.body).end_object();
  return json.take();
}

std::optional<std::string> source_field(std::string_view source, std::string_view field) {
  const nlohmann::json object = nlohmann::json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(field);
  if (it == object.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return std::nullopt;
}

}  // namespace warp
