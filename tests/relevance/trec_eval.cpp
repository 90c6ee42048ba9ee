#include "tests/relevance/trec_eval.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace warp::relevance {

Qrels read_qrels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open qrels " + path);
  Qrels qrels;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string qid, iteration, doc;
    int grade;
    if (!(fields >> qid >> iteration >> doc >> grade)) throw std::runtime_error("malformed qrels line: " + line);
    qrels[qid][doc] = grade;
  }
  return qrels;
}

Run read_run(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open run " + path);
  std::map<std::string, std::vector<std::pair<int, std::string>>> ranked;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string qid, q0, doc, tag;
    int rank;
    double score;
    if (!(fields >> qid >> q0 >> doc >> rank >> score >> tag)) throw std::runtime_error("malformed run line: " + line);
    ranked[qid].push_back({rank, doc});
  }
  Run run;
  for (auto& [qid, docs] : ranked) {
    std::stable_sort(docs.begin(), docs.end());
    for (auto& [rank, doc] : docs) run[qid].push_back(doc);
  }
  return run;
}

Scores evaluate(const Qrels& qrels, const Run& run) {
  Scores total;
  for (const auto& [qid, judged] : qrels) {
    size_t relevant = 0;
    std::vector<int> ideal;
    for (const auto& [doc, grade] : judged) {
      if (grade > 0) ++relevant, ideal.push_back(grade);
    }
    if (relevant == 0) continue;
    ++total.queries;
    auto it = run.find(qid);
    if (it == run.end()) continue;
    const std::vector<std::string>& docs = it->second;
    std::sort(ideal.rbegin(), ideal.rend());
    double dcg = 0, idcg = 0, precision_sum = 0;
    size_t hits = 0, hits_at_10 = 0;
    for (size_t rank = 0; rank < std::min<size_t>(docs.size(), 1000); ++rank) {
      auto judgement = judged.find(docs[rank]);
      const int grade = judgement == judged.end() ? 0 : judgement->second;
      if (rank < 10) dcg += grade / std::log2(rank + 2.0);
      if (grade > 0) {
        ++hits;
        if (rank < 10) ++hits_at_10;
        precision_sum += static_cast<double>(hits) / (rank + 1);
      }
    }
    for (size_t rank = 0; rank < std::min<size_t>(ideal.size(), 10); ++rank)
      idcg += ideal[rank] / std::log2(rank + 2.0);
    total.ndcg_at_10 += dcg / idcg;
    total.precision_at_10 += hits_at_10 / 10.0;
    total.map += precision_sum / relevant;
  }
  if (total.queries > 0) {
    total.ndcg_at_10 /= total.queries;
    total.precision_at_10 /= total.queries;
    total.map /= total.queries;
  }
  return total;
}

}  // namespace warp::relevance
