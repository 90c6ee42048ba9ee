// The cost models' first fit: synthetic queries over a target's lists, timed on each processor.
#include <algorithm>
#include <cstdio>
#include <future>
#include <random>

#include "common/util/status.hpp"
#include "leaf/sched/scheduler_state.hpp"

namespace warp::sched {

void Scheduler::calibrate(const Target& target) {
  const IndexView& index = *target.index;
  std::vector<const std::string*> terms;
  terms.reserve(index.lexicon.size());
  for (const auto& [term, info] : index.lexicon) terms.push_back(&term);
  if (terms.empty()) return;
  // Longest lists first (list words are proportional to postings); ties by text: deterministic.
  std::sort(terms.begin(), terms.end(), [&](const std::string* a, const std::string* b) {
    const uint32_t wa = index.lexicon.at(*a).words, wb = index.lexicon.at(*b).words;
    return wa != wb ? wa > wb : *a < *b;
  });
  std::mt19937_64 random(state_->options.seed);
  std::uniform_real_distribution<double> log_rank(0, std::log(static_cast<double>(terms.size())));
  const std::array<std::pair<QueryMode, size_t>, 4> shapes{
      {{QueryMode::kOr, 10}, {QueryMode::kOr, 1000}, {QueryMode::kAnd, 10}, {QueryMode::kAndOr, 10}}};
  std::vector<Query> queries;
  for (size_t i = 0; i < 512; ++i) {
    Query q;
    const size_t n = 1 + i % 4;
    for (size_t t = 0; t < n; ++t)
      q.terms.push_back(*terms[std::min(terms.size() - 1, static_cast<size_t>(std::exp(log_rank(random))) - 1)]);
    q.mode = shapes[(i / 4) % shapes.size()].first;
    q.k = shapes[(i / 4) % shapes.size()].second;
    queries.push_back(std::move(q));
  }
  // Prepared before they are timed, as submit() prepares them before they reach a processor.
  std::vector<PreparedQuery> prepared;
  std::vector<QueryFeatures> features;
  for (Query& q : queries) {
    prepared.push_back(prepare_query(std::move(q), index));
    features.push_back(features_of(prepared.back()));
  }
  const auto timed = [](auto&& run) {
    const auto start = Clock::now();
    run();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double budget = state_->options.calibration_seconds;
  double spent = 0;
  for (size_t i = 0; i < prepared.size() && spent < budget; ++i) {
    const double t = timed([&] { target.cpu->search(prepared[i]); });
    spent += t;
    std::lock_guard<SpinMutex> lock(state_->mutex);
    state_->core.model(Processor::kCpu).observe(features[i], t);
  }
  if (target.gpu == nullptr || !state_->core.gpu_usable()) return;
  // Every GPU run goes through search_batch's path (start_batch), a lone query too.
  const auto alone = [&](size_t i) { return std::span<const PreparedQuery>(&prepared[i], 1); };
  target.gpu->search_batch(alone(0));  // the first GPU query pays for lazy set-up: not a sample
  spent = 0;
  const size_t batch = state_->core.options().batch_max;
  for (size_t i = 0; i < prepared.size() && spent < budget; ++i) {
    const double t = timed([&] { target.gpu->search_batch(alone(i)); });
    spent += t;
    // And batches of a few sizes, for the fixed cost and the queries' shares of a batch.
    std::span<const PreparedQuery> span;
    double tb = 0;
    if (batch > 1 && i % 4 == 3) {
      const size_t size = std::min<size_t>(2 + (i / 4) % (batch - 1), prepared.size());
      span = std::span<const PreparedQuery>(prepared.data() + (i + 1) % (prepared.size() - size + 1), size);
      tb = timed([&] { target.gpu->search_batch(span); });
      spent += tb;
    }
    std::lock_guard<SpinMutex> lock(state_->mutex);
    state_->core.model(Processor::kGpu).observe(features[i], t);
    if (!span.empty())
      state_->core.model(Processor::kGpu)
          .observe(std::span<const QueryFeatures>(features.data() + (span.data() - prepared.data()), span.size()), tb);
  }
}

}  // namespace warp::sched
