// Filters over an index's columns (common/index/doc_columns.hpp), the `filter` parameter of a
// search (docs/api.md#filters-and-facets):
//
//   lang:en                     a keyword field holds the value (any of its values, for several)
//   lang:"en-GB"                quoted: any characters, \" and \\ escaped
//   year>=1990   year<2000      a numeric field compared: >= > <= < = (and year:1990, equality)
//   lang:en AND year>=1990      AND binds tighter than OR; NOT negates; parentheses group
//   (lang:en OR lang:fr) AND NOT tag:draft
//
// A filter is evaluated into the documents of a partition it allows, which the query processors
// then honour while they rank, as they honour the query syntax's constraints (on the CPU and on
// the GPU: leaf/query/query_constraints.hpp): the top k of a filtered search is the true top k of
// the documents it allows. A document without the field fails every test of it (NOT passes it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/index/doc_columns.hpp"
#include "common/util/status.hpp"

namespace warp {

// A filter the syntax cannot take, or one naming a field the index does not have: the message
// names the column (1-based, in bytes) where it can.
class FilterError : public Error {
 public:
  using Error::Error;
};

struct FilterNode {
  enum class Kind : uint8_t { kAnd, kOr, kNot, kEquals, kCompare };
  enum class Op : uint8_t { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual };
  Kind kind = Kind::kEquals;
  std::vector<FilterNode> children;  // kAnd, kOr: two or more; kNot: one
  std::string field;                 // kEquals, kCompare
  std::string value;                 // kEquals: the value as written (unescaped)
  Op op = Op::kEqual;                // kCompare
  double number = 0;                 // kCompare
};

// At most this many tests in one filter (the broker's limit, and the leaf's).
inline constexpr size_t kMaxFilterTests = 64;

// `text` parsed; throws FilterError. Several filters of a request are joined with AND (and_all).
FilterNode parse_filter(std::string_view text);
FilterNode and_all(std::vector<FilterNode> filters);
// The filter as text that parse_filter reads back to the same filter (what a broker sends leaves
// and keys its cache with): fields and values quoted, numbers exact, parentheses everywhere.
std::string filter_text(const FilterNode& filter);
// Throws FilterError where the filter names a field `schema` lacks, compares a keyword field, or
// tests a numeric field for something that is not a number.
void check_filter(const FilterNode& filter, const ColumnSchema& schema);

// The documents of a partition of `doc_count` documents that `filter` allows, a bit each (bit d
// for doc - doc_begin). `columns` may be null (a partition without columns: no document has a
// field). Costs a pass over the numeric columns compared and the documents of the values tested.
std::vector<uint64_t> filter_bits(const FilterNode& filter, const DocColumns* columns, uint32_t doc_count);

// filter_bits kept for the filters asked again (a facet value clicked, the next page, a dashboard's
// refresh): a process-wide cache keyed by the columns' serial and the filter's text, of at most
// set_filter_cache_bytes (256 MiB by default; 0: none), the least recently used dropped first. On
// a partition of 25 million documents a numeric comparison costs 35 ms; a cached one, a lookup.
std::shared_ptr<const std::vector<uint64_t>> cached_filter_bits(const FilterNode& filter, const DocColumns* columns,
                                                                uint32_t doc_count);
void set_filter_cache_bytes(size_t bytes);
struct FilterCacheStats {
  uint64_t hits = 0, misses = 0, bytes = 0, entries = 0;
};
FilterCacheStats filter_cache_stats();

}  // namespace warp
