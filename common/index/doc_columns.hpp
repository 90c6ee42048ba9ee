// A partition's columns: the values of the keyword and numeric fields an index declares
// (`--keyword-fields`, `--numeric-fields`), taken from each document's JSON form, one column a
// field. Filters test them while a query is processed and facets count their values over the
// documents a query matches (docs/api.md#filters-and-facets). A keyword field holds strings (a
// string, a number or a boolean as its JSON text, or an array of those: several values); a numeric
// field one number. A document without the field, or with a value of another type, has none.
// Kept in the partition's meta family (the row `columns`, with a CRC of its own) and in memory
// beside the lists (IndexView::columns).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace warp {

struct ColumnSchema {
  std::vector<std::string> keyword, numeric;  // field names, in the order declared
  bool empty() const { return keyword.empty() && numeric.empty(); }
  bool operator==(const ColumnSchema&) const = default;
  // "keyword=a,b numeric=c": what a build's fingerprint and log lines carry.
  std::string describe() const;
};

// From comma-separated lists of field names (the flags). Throws Error on a name that is empty, not
// made of ASCII letters, digits, '_', '-' and '.', longer than 64 bytes, one of the text fields
// (id, title, body, url), or declared twice.
ColumnSchema parse_column_schema(std::string_view keyword, std::string_view numeric);

struct KeywordColumn {
  std::string field;
  std::vector<std::string> values;     // distinct, in byte order: a value's id is its position
  std::vector<uint32_t> doc_starts;    // doc_count + 1: document d's ids are doc_values[doc_starts[d], [d+1])
  std::vector<uint32_t> doc_values;    // each document's value ids, ascending, distinct
  std::vector<uint32_t> value_starts;  // values.size() + 1: value v's documents are value_docs[...]
  std::vector<uint32_t> value_docs;    // each value's documents (by doc - doc_begin), ascending

  std::optional<uint32_t> find(std::string_view value) const;
  // Fills value_starts and value_docs from doc_starts and doc_values (a counting sort).
  void index_values(uint32_t doc_count);
  std::span<const uint32_t> docs_of(uint32_t value) const {
    return {value_docs.data() + value_starts[value], value_starts[value + 1] - value_starts[value]};
  }
  std::span<const uint32_t> values_of(uint32_t doc) const {
    return {doc_values.data() + doc_starts[doc], doc_starts[doc + 1] - doc_starts[doc]};
  }
};

struct NumericColumn {
  std::string field;
  std::vector<double> values;  // by doc - doc_begin; NaN where the document has none
};

// Distinct for every DocColumns made (copies keep theirs: the same values): what the filters' cache
// (common/query/filter.hpp) keys their documents by.
uint64_t next_columns_serial();

struct DocColumns {
  uint64_t serial = next_columns_serial();
  uint32_t doc_count = 0;
  std::vector<KeywordColumn> keyword;
  std::vector<NumericColumn> numeric;

  const KeywordColumn* keyword_field(std::string_view field) const;
  const NumericColumn* numeric_field(std::string_view field) const;
  ColumnSchema schema() const;
  // The meta row's bytes, and back. parse throws Error on bytes that are not such a row (a CRC
  // mismatch, a count out of range, a value id past the dictionary) or hold another doc_count.
  std::string serialize() const;
  static DocColumns parse(std::string_view bytes, uint32_t doc_count);
};

// Collects the declared fields' values document by document (in docID order), then makes the
// columns. Slices of a partition built apart are joined with append, in order.
class ColumnsBuilder {
 public:
  explicit ColumnsBuilder(ColumnSchema schema);
  // The next document's values from its JSON form (`source`: a JSON object; anything else, or an
  // empty string, gives it no values).
  void add(std::string_view source);
  void append(const ColumnsBuilder& next);
  uint32_t size() const { return documents_; }
  DocColumns build() const;

 private:
  ColumnSchema schema_;
  uint32_t documents_ = 0;
  // By keyword field: each document's values back to back, and where each document's start.
  std::vector<std::vector<std::string>> strings_;
  std::vector<std::vector<uint32_t>> string_starts_;
  std::vector<std::vector<double>> numbers_;  // by numeric field, by document
};

}  // namespace warp
