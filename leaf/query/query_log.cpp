#include "leaf/query/query_log.hpp"

#include <cstdio>
#include <fstream>
#include <ostream>

#include "common/util/utf8.hpp"
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

std::string trec_safe_id(std::string_view id) {
  std::string safe;
  safe.reserve(id.size());
  for (unsigned char c : id) {
    if (c <= 0x20 || c == 0x7F || c == '%') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", c);
      safe += escaped;
    } else {
      safe += static_cast<char>(c);
    }
  }
  return safe;
}

void write_trec_run(std::ostream& out, const std::string& query_id, const std::vector<Hit>& hits,
                    const std::vector<std::string>& external_ids, const std::string& tag) {
  char score[32];
  const std::string qid = trec_safe_id(query_id);
  for (size_t rank = 0; rank < hits.size(); ++rank) {
    std::snprintf(score, sizeof score, "%.9g", hits[rank].score);
    out << qid << " Q0 " << trec_safe_id(external_ids[rank]) << ' ' << rank + 1 << ' ' << score << ' ' << tag << '\n';
  }
}

}  // namespace warp
