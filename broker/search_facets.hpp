// A search's filters and facets at the broker (docs/api.md#filters-and-facets): the request's
// filters parsed, joined with AND and checked against the index's columns before any leaf is
// asked, and the partitions' facet counts summed into the answer's `facets`.
#pragma once
#include <optional>
#include <string>

#include "broker/fan_out.hpp"
#include "broker/search_params.hpp"
#include "common/index/doc_columns.hpp"
#include "common/util/json_writer.hpp"

namespace warp {

// Sets `filter` to the filters' text for the leaves (empty: none), expands facets=* to every column
// and notes which facets are numeric; the 400's message where a filter cannot be parsed, names a
// field the index lacks, or a facet is not one of its fields.
std::optional<std::string> read_filters_and_facets(SearchParams& params, const ColumnSchema& columns,
                                                   std::string& filter);

// How many of its values each partition lists of a field: enough that a field of up to this many
// values in a partition is counted exactly, whatever facet_size asks.
inline constexpr uint32_t kFacetValuesPerPartition = 1000;

// "facets": {field: {"exact", "other", "type", "values": [{"count", "value"}]}} over the partitions that
// answered (keys in byte order, as every answer's), then "matches" is written by the caller.
void write_facets(JsonWriter& json, const FanOutResult& result, const SearchParams& params);
// The documents the query matches over the partitions that counted facets.
uint64_t facet_matches(const FanOutResult& result);

}  // namespace warp
