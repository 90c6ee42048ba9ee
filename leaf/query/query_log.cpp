#include "leaf/query/query_log.hpp"

#include <cstdio>
#include <fstream>
#include <ostream>

#include "common/analysis/utf8.hpp"
#include "common/util/status.hpp"

namespace warp {

std::vector<QueryLine> read_query_file(const std::string& path, std::vector<std::string>& errors) {
  std::ifstream in(path);
  if (!in) throw Error("queries " + path + ": cannot open");
  std::vector<QueryLine> queries;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) {
      errors.push_back(path + ":" + std::to_string(number) + ": expected 'qid<TAB>query text'");
      continue;
    }
    queries.push_back({line.substr(0, tab), utf8_sanitize(line.substr(tab + 1))});
  }
  return queries;
}

void write_trec_run(std::ostream& out, const std::string& query_id, const std::vector<Hit>& hits,
                    const std::vector<std::string>& external_ids, const std::string& tag) {
  char score[32];
  for (size_t rank = 0; rank < hits.size(); ++rank) {
    std::snprintf(score, sizeof score, "%.6f", hits[rank].score);
    out << query_id << " Q0 " << external_ids[rank] << ' ' << rank + 1 << ' ' << score << ' ' << tag << '\n';
  }
}

}  // namespace warp
