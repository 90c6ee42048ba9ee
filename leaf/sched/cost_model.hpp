// Per-processor cost models for the leaf's scheduler (Ding et al. 2009 §9). Ding et al. trained M5
// model trees offline on the features below; here each processor has a linear model fitted online
// by weighted least squares: calibrated at start-up on synthetic queries over the partition's own
// lists, then refined from every measured run, older observations fading (a forgetting factor), so
// the model follows the load the machine is really under (CPU times grow when every core is busy).
// Why linear: a query's work on either processor is close to linear in the postings it touches
// (decoding, intersecting, scoring); the mode and k enter as interactions (AND work follows the
// shortest list times the terms, OR work the sum of the lists, more so for a large k, which prunes
// less). Weights 1/min(t, predicted)² make the fit minimise relative error: a 50 µs query matters
// as much as a 50 ms one. Once the fit has settled, a run counts at most 4× its fitted time in the
// fit and 32× in the bias below (a preempted thread's search is not its cost): a model too low
// rises by up to 4× a refit, one too high falls as fast as its runs show. A run may hold several queries (a GPU batch):
// its time is modelled as one fixed cost plus the sum of the queries' own costs, so the same fit learns the batch
// overhead.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "common/index/index_view.hpp"
#include "common/query/query.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp::sched {

// What a query's cost depends on, on one partition (list lengths are the partition's own).
struct QueryFeatures {
  uint64_t shortest = 0;  // postings of the shortest list (0 when a term is missing)
  uint64_t second = 0;    // of the second shortest
  uint64_t total = 0;     // of every list
  uint32_t terms = 0;     // distinct terms found in the partition
  QueryMode mode = QueryMode::kOr;
  uint32_t k = 10;
};

QueryFeatures features_of(const PreparedQuery& prepared);  // its lists' headers read, no lookup
QueryFeatures features_of(const Query& query, const IndexView& index);

inline constexpr size_t kFeatureCount = 10;
using FeatureVector = std::array<double, kFeatureCount>;

// The query's own terms of the model (element 0, the per-run fixed cost, is 0 here).
FeatureVector feature_vector(const QueryFeatures& features);

// Observations folded together away from the model (outside the scheduler's lock): the sums
// observe() would add one observation at a time, each weighted against the same fit (a copy of the
// model's coefficients taken with the work), so that the model itself does one fade, one addition
// and at most one refit for all of them (CostModel::fold, CostModel::apply).
struct FoldedObservations {
  std::array<double, kFeatureCount * kFeatureCount> gram{};  // Σ w x xᵀ, faded as observe() fades
  std::array<double, kFeatureCount> moment{};
  double measured = 0, fitted = 0;  // the bias's sums, faded likewise
  uint32_t count = 0;
};

class CostModel {
 public:
  explicit CostModel(double forgetting = 0.995);  // about the last 200 runs
  // Seconds a run of these queries is predicted to take (at least 1 µs).
  double predict(std::span<const QueryFeatures> run) const;
  double predict(const QueryFeatures& query) const { return predict(std::span(&query, 1)); }
  // The query's share of a run, without the fixed cost.
  double predict_marginal(const QueryFeatures& query) const;
  double fixed_cost() const;
  // A run's prediction built one query at a time (a GPU batch being filled): `unscaled` is the sum
  // of the run's queries' query_term(); run_time(unscaled) equals predict(run).
  double query_term(const QueryFeatures& query) const;
  double run_time(double unscaled) const;
  // A measured run: the model is refitted every few observations.
  void observe(std::span<const QueryFeatures> run, double seconds);
  void observe(const QueryFeatures& query, double seconds) { observe(std::span(&query, 1), seconds); }
  // The same in two steps: fold() adds a measured run to `into`, weighted against `fit` (the
  // model's snapshot() when the work was taken), touching and reading nothing of the model's but
  // its fading factor, fixed at construction (so callers fold outside the scheduler's lock); apply()
  // adds what was folded as that many observe() calls would, with the fit held between them.
  struct Snapshot {
    FeatureVector coefficients{};
    bool settled = false;  // runs far above their fit are capped (fold)
  };
  const FeatureVector& coefficients() const { return coefficients_; }
  Snapshot snapshot() const;
  void fold(FoldedObservations& into, const Snapshot& fit, std::span<const QueryFeatures> run, double seconds) const;
  void apply(const FoldedObservations& folded);
  // Old observations weigh `keep` (0..1) of what they did, the bias's sums likewise: for evidence
  // that the costs have moved (a probe far faster than predicted), so that the next observations
  // correct the model in a few runs instead of the hundreds its fading takes.
  void forget(double keep);
  uint64_t observations() const { return observations_; }
  void refit();

 private:
  double forgetting_;
  std::array<double, kFeatureCount * kFeatureCount> gram_{};  // Σ w x xᵀ, faded
  std::array<double, kFeatureCount> moment_{};                // Σ w x t, faded
  FeatureVector coefficients_{};
  uint64_t observations_ = 0;
  // Measured over fitted time, summed over recent runs: the fit minimises relative error, which
  // for the long-tailed times of real queries predicts below the mean; queue backlogs add
  // predictions up, so every prediction is scaled by this ratio of sums.
  double measured_sum_ = 0, fitted_sum_ = 0;
  double bias() const { return fitted_sum_ > 0 ? measured_sum_ / fitted_sum_ : 1; }
  double fitted(std::span<const QueryFeatures> run) const { return fitted_with(coefficients_, run); }
  static double fitted_with(const FeatureVector& coefficients, std::span<const QueryFeatures> run);
};

}  // namespace warp::sched
