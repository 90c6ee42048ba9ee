// libFuzzer: any bytes as a search's filter (common/query/filter.hpp) or as a partition's columns
// row (common/index/doc_columns.hpp), chosen by the first byte. A filter either is refused with a
// FilterError or reads its own text back to the same text, and its documents over a small
// partition's columns never set a bit past the last document; a columns row either is refused with
// an Error or serializes back to bytes that parse to the same columns.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/index/doc_columns.hpp"
#include "common/query/filter.hpp"

namespace {

const warp::DocColumns& small_partition() {
  static const warp::DocColumns columns = [] {
    warp::ColumnsBuilder builder(warp::parse_column_schema("lang,tags", "year"));
    builder.add(R"({"lang":"en","tags":["a","b"],"year":1990})");
    builder.add(R"({"lang":"fr","year":2001.5})");
    builder.add("");
    for (int i = 0; i < 67; ++i) builder.add(R"({"tags":"c","year":)" + std::to_string(1900 + i) + "}");
    return builder.build();
  }();
  return columns;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    warp::FilterNode filter;
    try {
      filter = warp::parse_filter(input);
    } catch (const warp::FilterError&) {
      return 0;
    }
    const std::string text = warp::filter_text(filter);
    if (warp::filter_text(warp::parse_filter(text)) != text) std::abort();
    const warp::DocColumns& columns = small_partition();
    const std::vector<uint64_t> bits = warp::filter_bits(filter, &columns, columns.doc_count);
    if (bits.size() != (columns.doc_count + 63) / 64 || bits.back() >> (columns.doc_count % 64) != 0) std::abort();
    try {
      warp::check_filter(filter, columns.schema());
    } catch (const warp::FilterError&) {
    }
    return 0;
  }
  const uint32_t doc_count = data[0] / 2;
  warp::DocColumns columns;
  try {
    columns = warp::DocColumns::parse(input, doc_count);
  } catch (const warp::Error&) {
    return 0;
  }
  const std::string bytes = columns.serialize();
  if (warp::DocColumns::parse(bytes, doc_count).serialize() != bytes) std::abort();
  return 0;
}
