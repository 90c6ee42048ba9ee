#include "leaf/sched/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/index/posting_list.hpp"

namespace warp::sched {
namespace {
// Observations after which the fit counts as settled: the bias's sums start, outliers are capped.
constexpr uint64_t kSettled = 32;
constexpr double kOutlier = 4, kOutlierBias = 32;
}  // namespace

QueryFeatures features_of(const PreparedQuery& prepared) {
  const QueryScoring& scoring = prepared.scoring;
  QueryFeatures f;
  f.mode = prepared.query.mode;
  f.k = static_cast<uint32_t>(prepared.query.k);
  std::vector<uint64_t> counts;  // per distinct term; a term the partition lacks has an empty list
  for (size_t i = 0; i < scoring.terms.size(); ++i) {
    const TermInfo* info = scoring.infos[i];
    // The list's own count (df is collection-wide); parsing reads only the header.
    counts.push_back(info == nullptr ? 0 : prepared.index->list(scoring.terms[i].text, *info).count);
    f.terms += info != nullptr;
    f.total += counts.back();
  }
  std::sort(counts.begin(), counts.end());
  f.shortest = counts.empty() ? 0 : counts[0];
  f.second = counts.size() < 2 ? 0 : counts[1];
  return f;
}

QueryFeatures features_of(const Query& query, const IndexView& index) {
  return features_of(prepare_query(query, index));
}

FeatureVector feature_vector(const QueryFeatures& f) {
  constexpr double kScale = 1e-6;  // postings in millions: every feature of order 1
  const bool conjunctive = f.mode != QueryMode::kOr;
  const double a = conjunctive ? 1 : 0, o = 1 - a;
  const double k_factor = std::log2(std::max<double>(f.k, 1)) / 10;
  return {0,
          a,
          o,
          a * f.shortest * kScale,
          a * f.second * kScale,
          a * f.total * kScale,
          a * f.shortest * f.terms * kScale,
          o * f.total * kScale,
          o * f.total * k_factor * kScale,
          f.terms / 10.0};
}

CostModel::CostModel(double forgetting) : forgetting_(forgetting) {
  // A neutral start (100 µs a run) until the first fit.
  coefficients_[0] = 1e-4;
}

double CostModel::fitted_with(const FeatureVector& coefficients, std::span<const QueryFeatures> run) {
  double t = coefficients[0];
  for (const QueryFeatures& q : run) {
    const FeatureVector x = feature_vector(q);
    for (size_t i = 1; i < kFeatureCount; ++i) t += coefficients[i] * x[i];
  }
  return std::max(t, 1e-6);
}

double CostModel::predict(std::span<const QueryFeatures> run) const { return fitted(run) * bias(); }

double CostModel::predict_marginal(const QueryFeatures& query) const {
  const FeatureVector x = feature_vector(query);
  double t = 0;
  for (size_t i = 1; i < kFeatureCount; ++i) t += coefficients_[i] * x[i];
  return std::max(t, 1e-7) * bias();
}

double CostModel::query_term(const QueryFeatures& query) const {
  const FeatureVector x = feature_vector(query);
  double t = 0;
  for (size_t i = 1; i < kFeatureCount; ++i) t += coefficients_[i] * x[i];
  return t;
}

double CostModel::run_time(double unscaled) const { return std::max(coefficients_[0] + unscaled, 1e-6) * bias(); }

double CostModel::fixed_cost() const { return std::max(coefficients_[0], 0.0) * bias(); }

void CostModel::observe(std::span<const QueryFeatures> run, double seconds) {
  FoldedObservations folded;
  fold(folded, snapshot(), run, seconds);
  apply(folded);
}

CostModel::Snapshot CostModel::snapshot() const { return {coefficients_, observations_ >= kSettled}; }

void CostModel::fold(FoldedObservations& into, const Snapshot& fit, std::span<const QueryFeatures> run,
                     double seconds) const {
  if (run.empty() || !(seconds > 0)) return;
  FeatureVector x{};
  x[0] = 1;
  for (const QueryFeatures& q : run) {
    const FeatureVector qx = feature_vector(q);
    for (size_t i = 1; i < kFeatureCount; ++i) x[i] += qx[i];
  }
  // Relative error, both ways: an under-prediction by 30× weighs as much as an over-prediction by
  // 30× (1/t² alone would let old observations outvote new ones after a large change).
  const double fitted_seconds = fitted_with(fit.coefficients, run);
  // Once the model has settled, a run counts at most kOutlier times its fitted time. A search whose
  // thread was preempted (the H200 host past capacity has CPU runs of 10-96 ms where a short search
  // takes ~0.05 ms) otherwise weighed as much as a correct observation with a residual hundreds of
  // times larger: one run 250x its cost made the next refit predict 43x too much for short queries
  // (scheduler_test), enough to send the processor nothing to learn from. A real slowdown still
  // comes through, by up to kOutlier a refit.
  // The bias's sums keep real long tails (searches several times their fit, whose mean the bias is
  // there for: capped at 4x, the CPU's predictions fell and its queue waited more, H200 host) and
  // bound only the isolated outliers.
  double for_bias = seconds;
  if (fit.settled) {
    for_bias = std::min(seconds, kOutlierBias * fitted_seconds);
    seconds = std::min(seconds, kOutlier * fitted_seconds);
  }
  const double reference = std::min(seconds, fitted_seconds);
  const double w = 1 / (reference * reference);
  into.measured = into.measured * 0.99 + for_bias;
  into.fitted = into.fitted * 0.99 + fitted_seconds;
  for (double& g : into.gram) g *= forgetting_;
  for (double& m : into.moment) m *= forgetting_;
  for (size_t i = 0; i < kFeatureCount; ++i) {
    into.moment[i] += w * x[i] * seconds;
    for (size_t j = 0; j < kFeatureCount; ++j) into.gram[i * kFeatureCount + j] += w * x[i] * x[j];
  }
  ++into.count;
}

void CostModel::apply(const FoldedObservations& folded) {
  if (folded.count == 0) return;
  const double fade = std::pow(forgetting_, static_cast<double>(folded.count));
  for (size_t i = 0; i < gram_.size(); ++i) gram_[i] = gram_[i] * fade + folded.gram[i];
  for (size_t i = 0; i < moment_.size(); ++i) moment_[i] = moment_[i] * fade + folded.moment[i];
  // The bias's sums once the fit has settled (over about the last 100 runs).
  if (observations_ >= kSettled) {
    const double bias_fade = std::pow(0.99, static_cast<double>(folded.count));
    measured_sum_ = measured_sum_ * bias_fade + folded.measured;
    fitted_sum_ = fitted_sum_ * bias_fade + folded.fitted;
  }
  const uint64_t before = observations_;
  observations_ += folded.count;
  // Refitted every 8 observations (each of the first 32).
  if (observations_ < kSettled || observations_ / 8 != before / 8) refit();
}

void CostModel::forget(double keep) {
  keep = std::clamp(keep, 0.0, 1.0);
  for (double& g : gram_) g *= keep;
  for (double& m : moment_) m *= keep;
  measured_sum_ *= keep;
  fitted_sum_ *= keep;
}

// Solves (G + λI) c = m by Cholesky; λ, a small ridge, keeps features no observation has seen
// (e.g. OR terms before the first OR query) at zero and the system well posed.
void CostModel::refit() {
  constexpr size_t n = kFeatureCount;
  double trace = 0;
  for (size_t i = 0; i < n; ++i) trace += gram_[i * n + i];
  if (trace <= 0) return;
  std::array<double, n * n> l{};
  const double ridge = 1e-6 * trace / n + 1e-12;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = gram_[i * n + j] + (i == j ? ridge : 0);
      for (size_t p = 0; p < j; ++p) s -= l[i * n + p] * l[j * n + p];
      if (i == j) {
        if (s <= 0) return;  // not positive definite: keep the previous fit
        l[i * n + i] = std::sqrt(s);
      } else {
        l[i * n + j] = s / l[j * n + j];
      }
    }
  }
  std::array<double, n> y{};
  for (size_t i = 0; i < n; ++i) {
    double s = moment_[i] + ridge * coefficients_[i];  // the ridge pulls toward the fit so far, not 0
    for (size_t p = 0; p < i; ++p) s -= l[i * n + p] * y[p];
    y[i] = s / l[i * n + i];
  }
  FeatureVector c{};
  for (size_t i = n; i-- > 0;) {
    double s = y[i];
    for (size_t p = i + 1; p < n; ++p) s -= l[p * n + i] * c[p];
    c[i] = s / l[i * n + i];
  }
  for (double v : c) {
    if (!std::isfinite(v)) return;
  }
  coefficients_ = c;
}

}  // namespace warp::sched
