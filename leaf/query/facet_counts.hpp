// Facets: how many of the documents a query matches hold each value of a keyword or numeric field
// (common/index/doc_columns.hpp), exact, over the documents its constraints and filter allow and
// no deleted or replaced one. The matching documents are those holding every scored term (AND, and
// AND+OR where its AND found k) or any of them (OR, and AND+OR where it fell back): a pass over
// the query's lists and the constraints' on the CPU, whichever processor ranked, then the matching
// documents' values counted. The pass is bounded: past `max_postings` postings the facets are not
// counted and say so.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index/index_view.hpp"
#include "common/query/query.hpp"
#include "leaf/query/posting_cursor.hpp"

namespace warp {

struct FacetValue {
  std::string value;  // a keyword as stored; a number as %.17g writes it
  uint64_t count = 0;
};

struct FacetField {
  std::string field;
  std::vector<FacetValue> values;  // by count, most first, then by value
  uint64_t others = 0;             // documents' values past those listed (counted, not listed)
  uint64_t other_values = 0;       // distinct values past those listed
};

struct FacetResult {
  uint64_t matches = 0;  // documents matching (allowed, not deleted)
  std::string error;     // not counted: why
  std::vector<FacetField> fields;
};

class FacetCounter {
 public:
  // `fields`: each a keyword or numeric column's name (one the index lacks counts nothing).
  FacetCounter(std::vector<std::string> fields, uint64_t max_postings);
  // Adds the documents of `index` the query matches (`any_term`: holding any scored term, else
  // every one), less those `deleted` marks (a byte by doc - doc_begin; may be empty).
  void count(const Query& query, bool any_term, const IndexView& index, const std::vector<uint8_t>& deleted,
             CursorStats* stats = nullptr);
  // The counts, each field's `max_values` most frequent values listed.
  FacetResult take(size_t max_values);

 private:
  std::vector<std::string> fields_;
  uint64_t max_postings_ = 0, postings_ = 0;
  FacetResult result_;
  std::vector<std::unordered_map<std::string, uint64_t>> keyword_counts_;  // by field
  std::vector<std::map<double, uint64_t>> numeric_counts_;                 // by field
};

}  // namespace warp
