#include "leaf/query/cpu_query_processor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>

#include "common/util/status.hpp"
#include "leaf/query/algorithms.hpp"

namespace warp {

OrAlgorithm parse_or_algorithm(std::string_view text) {
  if (text == "maxscore") return OrAlgorithm::kMaxScore;
  if (text == "bmw") return OrAlgorithm::kBlockMaxWand;
  if (text == "tiles") return OrAlgorithm::kTiles;
  throw Error("unknown OR algorithm '" + std::string(text) + "' (use tiles, bmw or maxscore)");
}

std::string_view or_algorithm_name(OrAlgorithm algorithm) {
  switch (algorithm) {
    case OrAlgorithm::kMaxScore: return "maxscore";
    case OrAlgorithm::kBlockMaxWand: return "bmw";
    case OrAlgorithm::kTiles: return "tiles";
  }
  return "?";
}

Score or_floor(const QueryScoring& scoring, const IndexView& index, size_t k) {
  if (k == 0) return 0;
  if (k > kTermTops) {  // the terms' rank floors: the first rank at or past k
    const size_t rank = static_cast<size_t>(std::lower_bound(kRankFloors.begin(), kRankFloors.end(), k) - kRankFloors.begin());
    Score floor = 0;
    for (size_t i = 0; i < scoring.terms.size(); ++i) {
      if (scoring.infos[i] == nullptr) continue;
      const std::span<const Score> floors = index.rank_floors(*scoring.infos[i]);
      if (rank >= floors.size()) continue;
      // In the query's units (an integer): the stored score scaled, less far more than the few
      // roundings by which a posting's units, before their ceil, may differ from it.
      floor = std::max(floor, static_cast<Score>(std::floor(double{floors[rank]} * scoring.scoring[i].bound_scale * (1 - 1e-5))));
    }
    return floor;
  }
  Score floor = 0;
  std::array<Score, kTermTops> scores;
  for (size_t i = 0; i < scoring.terms.size(); ++i) {
    if (scoring.infos[i] == nullptr) continue;
    const std::span<const Posting> tops = index.tops(*scoring.infos[i]);
    if (tops.empty()) continue;
    // Scored as PostingCursor::score() scores them: the same float operations, the same units.
    for (size_t t = 0; t < kTermTops; ++t) {
      scores[t] = bm25_units(scoring.scoring[i].unit_weight, tops[t].freq, index.length_norms[tops[t].doc - index.meta.doc_begin]);
    }
    // The k-th best of them (their order by the stored scores may differ from the query's units in
    // the last bit; the k-th largest of these is still at most the list's k-th best).
    std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k - 1), scores.end(), std::greater<Score>());
    floor = std::max(floor, scores[k - 1]);
  }
  return floor;
}

QueryResult CpuQueryProcessor::search(const Query& query) const {
  if (query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
  QueryResult result;
  const QueryScoring scoring = score_query(query, index_);

  std::vector<std::unique_ptr<PostingCursor>> owned;
  bool missing_term = false;
  const auto open_cursors = [&]() {
    owned.clear();
    std::vector<PostingCursor*> cursors;
    for (size_t i = 0; i < scoring.terms.size(); ++i) {
      const TermInfo* info = scoring.infos[i];
      if (info == nullptr) {
        missing_term = true;
        continue;
      }
      owned.push_back(std::make_unique<PostingCursor>(index_.list(scoring.terms[i].text, *info),
                                                      index_.length_norms.data(), index_.meta.doc_begin,
                                                      scoring.scoring[i], &result.stats));
      cursors.push_back(owned.back().get());
    }
    return cursors;
  };

  if (query.mode == QueryMode::kAnd || query.mode == QueryMode::kAndOr) {
    std::vector<PostingCursor*> cursors = open_cursors();
    TopkQueue topk(query.k);
    if (!missing_term && !cursors.empty()) result.and_matches = and_query(cursors, topk);
    result.hits = topk.take_sorted();
    units_to_scores(result.hits, scoring);
    if (query.mode == QueryMode::kAnd || result.hits.size() >= query.k) return result;
    result.fell_back_to_or = true;
  }
  std::vector<PostingCursor*> cursors = open_cursors();
  TopkQueue topk(query.k, options_.term_tops_floor ? or_floor(scoring, index_, query.k) : 0);
  if (options_.or_algorithm == OrAlgorithm::kMaxScore) {
    maxscore_query(cursors, topk);
  } else if (options_.or_algorithm == OrAlgorithm::kTiles) {
    tiled_or_query(cursors, topk);
  } else {
    block_max_wand_query(cursors, topk);
  }
  result.hits = topk.take_sorted();
  units_to_scores(result.hits, scoring);
  return result;
}

}  // namespace warp
