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

// Writes `qid Q0 external_id rank score tag` lines.
void write_trec_run(std::ostream& out, const std::string& query_id, const std::vector<Hit>& hits,
                    const std::vector<std::string>& external_ids, const std::string& tag);

}  // namespace warp
