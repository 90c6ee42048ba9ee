// A document's stored form, what a fetch returns for it: the JSON object it was given as (a JSONL
// line, a write through the API), kept byte for byte, or for TREC and WARC input an object of the
// fields read from it. Partitions keep it in their stored family (partition_format.hpp), compressed;
// a leaf reads a document's only for the hits it is asked to fetch.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "common/index/index_builder.hpp"

namespace warp {

// `doc.source` where it has one, else {"id","title","url","body"} of its fields.
std::string stored_source(const SourceDocument& doc);

// The string value of the top-level field `field` of the JSON object `source`; nullopt where the
// source is not an object, lacks the field, or the field is not a string (integers are written in
// decimal, as the readers take them).
std::optional<std::string> source_field(std::string_view source, std::string_view field);

}  // namespace warp
