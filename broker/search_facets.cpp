#include "broker/search_facets.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/query/filter.hpp"

namespace warp {

std::optional<std::string> read_filters_and_facets(SearchParams& params, const ColumnSchema& columns,
                                                   std::string& filter) {
  filter.clear();
  try {
    if (!params.filters.empty()) {
      std::vector<FilterNode> parsed;
      for (const std::string& text : params.filters) parsed.push_back(parse_filter(text));
      const FilterNode all = and_all(std::move(parsed));
      check_filter(all, columns);
      filter = filter_text(all);
    }
  } catch (const FilterError& e) {
    return std::string(e.what());
  }
  if (std::find(params.facets.begin(), params.facets.end(), "*") != params.facets.end()) {
    params.facets = columns.keyword;
    params.facets.insert(params.facets.end(), columns.numeric.begin(), columns.numeric.end());
  }
  params.numeric_facets.clear();
  for (const std::string& field : params.facets) {
    if (std::find(columns.numeric.begin(), columns.numeric.end(), field) != columns.numeric.end())
      params.numeric_facets.push_back(field);
    const auto has = [&](const std::vector<std::string>& names) {
      return std::find(names.begin(), names.end(), field) != names.end();
    };
    if (!has(columns.keyword) && !has(columns.numeric)) {
      std::string all;
      for (const auto* names : {&columns.keyword, &columns.numeric})
        for (const std::string& name : *names) all += (all.empty() ? "" : ", ") + name;
      return "facets: no field '" + field + "' to count (the index's fields: " +
             (all.empty() ? std::string("none: the index declares no keyword or numeric fields") : all) + ")";
    }
  }
  return std::nullopt;
}

uint64_t facet_matches(const FanOutResult& result) {
  uint64_t matches = 0;
  for (const PartitionOutcome& outcome : result.partitions)
    if (outcome.status == "ok") matches += outcome.facet_matches;
  return matches;
}

void write_facets(JsonWriter& json, const FanOutResult& result, const SearchParams& params) {
  json.key("facets").begin_object();
  std::vector<std::string> fields = params.facets;
  std::sort(fields.begin(), fields.end());
  std::string error;
  for (const PartitionOutcome& outcome : result.partitions)
    if (outcome.status == "ok" && !outcome.facet_error.empty()) error = outcome.facet_error;
  for (const std::string& field : fields) {
    std::unordered_map<std::string_view, uint64_t> counts;
    uint64_t other = 0;
    bool exact = error.empty();
    for (const PartitionOutcome& outcome : result.partitions) {
      if (outcome.status != "ok") {
        exact = false;
        continue;
      }
      for (const PartitionOutcome::Facet& facet : outcome.facets) {
        if (facet.field != field) continue;
        for (const auto& [value, count] : facet.values) counts[value] += count;
        other += facet.others;
        if (facet.other_values > 0) exact = false;  // values it did not list may be counted elsewhere
      }
    }
    std::vector<std::pair<std::string_view, uint64_t>> ranked(counts.begin(), counts.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    for (size_t i = params.facet_size; i < ranked.size(); ++i) other += ranked[i].second;
    if (ranked.size() > params.facet_size) ranked.resize(params.facet_size);
    json.key(field).begin_object();
    if (!error.empty()) json.key("error").value(error);
    const bool numeric =
        std::find(params.numeric_facets.begin(), params.numeric_facets.end(), field) != params.numeric_facets.end();
    json.key("exact").value(exact).key("other").value(other).key("type").value(numeric ? "numeric" : "keyword");
    json.key("values").begin_array();
    for (const auto& [value, count] : ranked)
      json.begin_object().key("count").value(count).key("value").value(value).end_object();
    json.end_array().end_object();
  }
  json.end_object();
}

}  // namespace warp
