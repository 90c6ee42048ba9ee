// A query's scoring on one partition, shared by the CPU and GPU processors so both weigh and
// bound every term with the same float operations (the "one ranking" invariant, docs/architecture.md); and
// the interface's default asynchronous batch.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>

#include "common/util/status.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp {

QueryScoring score_query(const Query& query, const IndexView& index, const LiveOverlay* live) {
  QueryScoring s;
  s.terms = distinct_terms(query);
  const Bm25Params& params = index.meta.bm25;
  std::vector<float> factors;
  double factor_sum = 0;
  for (const QueryTerm& term : s.terms) {
    factors.push_back(bm25_query_factor(term.count, params.k3));
    factor_sum += factors.back();
  }
  const uint64_t doc_count = live ? live->stats.doc_count : index.meta.stats.doc_count;
  s.units_per_score = bm25_units_per_score(factor_sum, doc_count, params);
  s.score_of_unit = 1.0f / s.units_per_score;
  s.infos.resize(s.terms.size(), nullptr);
  s.scoring.resize(s.terms.size());
  for (size_t i = 0; i < s.terms.size(); ++i) {
    const TermInfo* info = index.find(s.terms[i].text);
    s.infos[i] = info;
    if (info == nullptr) continue;
    if (live == nullptr) {
      const float idf = bm25_idf(info->df, index.meta.stats.doc_count);
      s.scoring[i] = {bm25_unit_weight(idf, params, factors[i], s.units_per_score), factors[i] * s.units_per_score};
      continue;
    }
    // The stored bounds hold the view's idf: scaled to today's (and its average length), with a
    // margin far above the roundings of the ratio.
    const float idf = bm25_idf(live->df_of(s.terms[i].text, *info), doc_count);
    const double stored_idf = bm25_idf(info->df, index.meta.stats.doc_count);
    const double growth = idf / stored_idf * live->bound_growth * (1 + 1e-5);
    s.scoring[i] = {bm25_unit_weight(idf, params, factors[i], s.units_per_score),
                    static_cast<float>(factors[i] * s.units_per_score * growth)};
  }
  return s;
}

std::optional<DocumentRecord> LiveSegment::document(DocId global_doc) const {
  auto it = std::lower_bound(global.begin(), global.end(), global_doc);
  if (it == global.end() || *it != global_doc) return std::nullopt;
  return (*records)[static_cast<size_t>(it - global.begin())];
}

LiveOverlay make_overlay(const IndexView& view, const CollectionStats& stats,
                         std::vector<std::shared_ptr<const DfMap>> df) {
  static std::atomic<uint64_t> serials{0};
  LiveOverlay live;
  live.serial = ++serials;
  live.stats = stats;
  live.df = std::move(df);
  const double average = stats.average_length();
  live.length_norms.resize(view.doc_lengths.size());
  for (size_t d = 0; d < view.doc_lengths.size(); ++d)
    live.length_norms[d] = bm25_length_norm(view.doc_lengths[d], average, view.meta.bm25);
  live.bound_growth = std::max(1.0, average / view.meta.stats.average_length());
  return live;
}

PreparedQuery prepare_query(Query query, const IndexView& index) {
  PreparedQuery prepared;
  prepared.scoring = score_query(query, index);
  prepared.query = std::move(query);
  prepared.index = &index;
  return prepared;
}

const QueryScoring& scoring_on(const PreparedQuery& prepared, const IndexView& index, QueryScoring& local) {
  if (prepared.index == &index) return prepared.scoring;
  local = score_query(prepared.query, index);
  return local;
}

Score or_floor(const QueryScoring& scoring, const IndexView& index, size_t k, const uint64_t* kept_out) {
  if (k == 0) return 0;
  if (k > kTermTops) {
    if (kept_out != nullptr)
      return 0;  // a rank's postings may be of documents kept out  // the terms' rank floors: the first rank at or past
                 // k
    const size_t rank =
        static_cast<size_t>(std::lower_bound(kRankFloors.begin(), kRankFloors.end(), k) - kRankFloors.begin());
    Score floor = 0;
    for (size_t i = 0; i < scoring.terms.size(); ++i) {
      if (scoring.infos[i] == nullptr) continue;
      const std::span<const Score> floors = index.rank_floors(*scoring.infos[i]);
      if (rank >= floors.size()) continue;
      // In the query's units (an integer): the stored score scaled, less far more than the few
      // roundings by which a posting's units, before their ceil, may differ from it.
      floor = std::max(
          floor, static_cast<Score>(std::floor(double{floors[rank]} * scoring.scoring[i].bound_scale * (1 - 1e-5))));
    }
    return floor;
  }
  Score floor = 0;
  std::array<Score, kTermTops> scores;
  for (size_t i = 0; i < scoring.terms.size(); ++i) {
    if (scoring.infos[i] == nullptr) continue;
    const std::span<const Posting> tops = index.tops(*scoring.infos[i]);
    if (tops.empty()) continue;
    // Scored as PostingCursor::score() scores them: the same float operations, the same units;
    // those of documents kept out left out.
    size_t n = 0;
    for (size_t t = 0; t < kTermTops; ++t) {
      const DocId d = tops[t].doc - index.meta.doc_begin;
      if (kept_out != nullptr && ((kept_out[d / 64] >> (d % 64)) & 1)) continue;
      scores[n++] = bm25_units(scoring.scoring[i].unit_weight, tops[t].freq, index.length_norms[d]);
    }
    if (n < k) continue;
    // The k-th best of them (their order by the stored scores may differ from the query's units in
    // the last bit; the k-th largest of these is still at most the list's k-th best).
    std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     scores.begin() + static_cast<std::ptrdiff_t>(n), std::greater<Score>());
    floor = std::max(floor, scores[k - 1]);
  }
  return floor;
}

void units_to_scores(std::vector<Hit>& hits, const QueryScoring& scoring) {
  for (Hit& hit : hits) hit.score *= scoring.score_of_unit;
}

namespace {
// The default start_batch's run: answered before it is returned.
class AnsweredRun final : public BatchRun {
 public:
  explicit AnsweredRun(std::vector<QueryResult> results) : results_(std::move(results)) {}
  bool poll() override { return true; }
  std::vector<QueryResult> take() override { return std::move(results_); }

 private:
  std::vector<QueryResult> results_;
};

class ThreadRun final : public BatchRun {
 public:
  explicit ThreadRun(std::function<std::vector<QueryResult>()> work)
      : answers_(std::async(std::launch::async, std::move(work))) {}
  bool poll() override { return answers_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  std::vector<QueryResult> take() override { return answers_.get(); }  // rethrows the work's failure

 private:
  std::future<std::vector<QueryResult>> answers_;  // its destructor waits for the thread
};
}  // namespace

std::unique_ptr<BatchRun> run_on_thread(std::function<std::vector<QueryResult>()> work) {
  return std::make_unique<ThreadRun>(std::move(work));
}

std::unique_ptr<BatchRun> answered_run(std::vector<QueryResult> results) {
  return std::make_unique<AnsweredRun>(std::move(results));
}

std::unique_ptr<BatchRun> QueryProcessor::start_batch(std::span<const PreparedQuery> queries) const {
  return answered_run(search_batch(queries));
}

std::vector<QueryResult> QueryProcessor::search_batch(std::span<const Query> queries) const {
  std::vector<PreparedQuery> prepared;
  prepared.reserve(queries.size());
  for (const Query& query : queries) prepared.push_back(prepare_query(query, index()));
  return search_batch(std::span<const PreparedQuery>(prepared));
}

}  // namespace warp
