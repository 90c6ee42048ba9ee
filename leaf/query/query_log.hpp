// Query files (`qid<TAB>text` per line) and TREC run output, shared by warp-search and the
// benchmarks.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "leaf/query/topk_queue.hpp"

namespace warp {

struct QueryLine {
  std::string id;
  std::string text;
};

// Reads a TSV query file; lines without a tab are reported in `errors` ("file:line: reason").
std::vector<QueryLine> read_query_file(const std::string& path, std::vector<std::string>& errors);

// The form of an external id (or query id) in a TREC run, whose lines are six fields split by
// whitespace: bytes up to 0x20 (spaces, tabs, newlines, controls), 0x7F and '%' become %XX, so
// "doc 1" is written "doc%201"; every other id is written as it is. Reversible; documents keep their
// ids as indexed.
std::string trec_safe_id(std::string_view id);

// Writes `qid Q0 external_id rank score tag` lines; ids in trec_safe_id's form, scores with the
// 9 significant digits that give back the exact float.
void write_trec_run(std::ostream& out, const std::string& query_id, const std::vector<Hit>& hits,
                    const std::vector<std::string>& external_ids, const std::string& tag);

}  // namespace warp
