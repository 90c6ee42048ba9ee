#include "leaf/query/cpu_query_processor.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include "common/util/status.hpp"
#include "leaf/query/algorithms.hpp"
#include "leaf/query/query_constraints.hpp"

namespace warp {

OrAlgorithm parse_or_algorithm(std::string_view text) {
  if (text == "maxscore") return OrAlgorithm::kMaxScore;
  if (text == "bmw") return OrAlgorithm::kBlockMaxWand;
  if (text == "tiles") return OrAlgorithm::kTiles;
  throw Error("unknown OR algorithm '" + std::string(text) + "' (use tiles, bmw or maxscore)");
}

std::string_view or_algorithm_name(OrAlgorithm algorithm) {
  switch (algorithm) {
    case OrAlgorithm::kMaxScore:
      return "maxscore";
    case OrAlgorithm::kBlockMaxWand:
      return "bmw";
    case OrAlgorithm::kTiles:
      return "tiles";
  }
  return "?";
}

QueryResult CpuQueryProcessor::search(const PreparedQuery& prepared) const {
  const Query& query = prepared.query;
  if (query.k > kMaxTopK) throw Error("k must be at most " + std::to_string(kMaxTopK));
  QueryResult result;
  QueryScoring local;
  const QueryScoring& scoring = scoring_on(prepared, index_, local);
  // Writes after the generation (live_overlay.hpp): today's norms, and the documents they replaced
  // or deleted kept out. Prepared elsewhere, the overlay is not this view's.
  const LiveOverlay* live = prepared.index == &index_ ? prepared.live : nullptr;
  const float* norms = live ? live->length_norms.data() : index_.length_norms.data();
  // The syntax's constraints keep documents out as deletions do (query_constraints.hpp). Required
  // words that are scored terms need no mask: AND holds them anyway, and OR is driven by their
  // lists (required_or_query); excluded groups do.
  const auto scored = [&](const std::string& term) {
    return std::any_of(scoring.terms.begin(), scoring.terms.end(), [&](const QueryTerm& t) { return t.text == term; });
  };
  const bool required_drive =
      !query.required.empty() && std::all_of(query.required.begin(), query.required.end(), scored);
  std::optional<ConstraintDocs> constraints = constraint_docs(query, index_, !required_drive, &result.stats);
  const std::vector<uint64_t> kept_out =
      constraints ? kept_out_bits(std::move(*constraints), index_) : std::vector<uint64_t>();
  const auto masked = [&](TopkQueue& topk) {
    if (live && !live->deleted.empty()) topk.mask(live->deleted.data(), index_.meta.doc_begin);
    if (!kept_out.empty()) topk.mask_bits(kept_out.data(), index_.meta.doc_begin);
  };

  std::vector<std::unique_ptr<PostingCursor>> owned;
  bool missing_term = false, missing_required = false;
  std::vector<PostingCursor*> required_cursors;  // of the last open_cursors(), where required_drive
  const auto open_cursors = [&]() {
    owned.clear();
    required_cursors.clear();
    std::vector<PostingCursor*> cursors;
    for (size_t i = 0; i < scoring.terms.size(); ++i) {
      const TermInfo* info = scoring.infos[i];
      const bool required = required_drive && std::find(query.required.begin(), query.required.end(),
                                                        scoring.terms[i].text) != query.required.end();
      if (info == nullptr) {
        missing_term = true;
        missing_required = missing_required || required;
        continue;
      }
      owned.push_back(std::make_unique<PostingCursor>(index_.list(scoring.terms[i].text, *info), norms,
                                                      index_.meta.doc_begin, scoring.scoring[i], &result.stats));
      (required ? required_cursors : cursors).push_back(owned.back().get());
    }
    return cursors;
  };

  if (query.mode == QueryMode::kAnd || query.mode == QueryMode::kAndOr) {
    std::vector<PostingCursor*> cursors = open_cursors();
    cursors.insert(cursors.end(), required_cursors.begin(), required_cursors.end());
    TopkQueue topk(query.k);
    masked(topk);
    if (!missing_term && !cursors.empty()) result.and_matches = and_query(cursors, topk);
    result.hits = topk.take_sorted();
    units_to_scores(result.hits, scoring);
    if (query.mode == QueryMode::kAnd || result.hits.size() >= query.k) return result;
    result.fell_back_to_or = true;
  }
  std::vector<PostingCursor*> cursors = open_cursors();
  // The floor's best postings and rank floors are of the generation's statistics: none with writes.
  // With constraints, the best postings of documents they leave in still give one, where the
  // bits hold every constraint (required words that drive do not: their lists hold them).
  const bool floored = options_.term_tops_floor && !live && !required_drive;
  TopkQueue topk(query.k,
                 floored ? or_floor(scoring, index_, query.k, kept_out.empty() ? nullptr : kept_out.data()) : 0);
  masked(topk);
  if (required_drive) {
    if (!missing_required) required_or_query(required_cursors, cursors, topk);
  } else if (options_.or_algorithm == OrAlgorithm::kMaxScore) {
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
