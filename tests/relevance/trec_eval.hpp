// A small TREC evaluator: nDCG@10 with graded gains (gain = grade, log2 discount, as trec_eval),
// P@10 (relevant: grade > 0) and MAP over the top 1000, averaged over the judged queries (a judged
// query without results scores 0).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace warp::relevance {

using Qrels = std::map<std::string, std::map<std::string, int>>;  // qid → doc → grade
using Run = std::map<std::string, std::vector<std::string>>;      // qid → docs in rank order

Qrels read_qrels(const std::string& path);  // "qid 0 docid grade" lines; throws on a malformed one
Run read_run(const std::string& path);      // "qid Q0 docid rank score tag" lines, ordered by rank

struct Scores {
  double ndcg_at_10 = 0;
  double precision_at_10 = 0;
  double map = 0;
  size_t queries = 0;
};

Scores evaluate(const Qrels& qrels, const Run& run);

}  // namespace warp::relevance
