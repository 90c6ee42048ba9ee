// The leaf's CPU+GPU scheduler at run time (Ding et al. 2009 §9): the decisions of ScheduleCore
// (three queues, stealing, deadlines, batches) driven by real processors. CPU worker threads (all
// the leaf's cores by default) each run one query at a time; GPU dispatcher threads (one per
// stream) each run a batch at a time (a lone query on the GPU's single-query path, several through
// its PARA batch path). Every run's measured time refines the processor's cost model. Queries are
// submitted with a completion callback, so no thread waits per query; `search` is the blocking
// form for tools and tests. A GPU that fails at run time is given up: its queries and everything
// queued go to the CPU, with one log line and a metric; no query fails for it.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "leaf/query/query_processor.hpp"
#include "leaf/sched/schedule_core.hpp"

namespace prometheus {
class Registry;
}

namespace warp::sched {

struct SchedulerOptions {
  CoreOptions core;                 // core.cpu_workers: CPU threads; core.gpu_streams: GPU threads
  double calibration_seconds = 1;   // start-up calibration per processor, on synthetic queries
  uint64_t seed = 1;                // of the calibration queries
};

// Where a query runs: the partition's index and its processors (gpu null: CPU only). Queries of
// the same `gpu` processor may share a batch. `keep` holds whatever must outlive the query (the
// generation the processors belong to).
struct Target {
  const IndexView* index = nullptr;
  const QueryProcessor* cpu = nullptr;
  const QueryProcessor* gpu = nullptr;
  std::shared_ptr<const void> keep;
};

struct Outcome {
  QueryResult result;
  std::string error;  // non-empty: not answered (deadline passed before it started)
  Processor processor = Processor::kCpu;
  QueueId queue = QueueId::kCpu;
  double seconds = 0;  // the run's time (a batch's for a query answered in a batch)
  double predicted = 0;
  size_t batch = 1;
  bool stolen = false, urgent = false;
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  using Done = std::function<void(Outcome&&)>;

  // registry: the warpsearch_leaf_scheduler_* metrics are registered there (null: none).
  Scheduler(SchedulerOptions options, std::shared_ptr<prometheus::Registry> registry = nullptr);
  ~Scheduler();  // answers what is queued, then stops
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Fits both cost models on synthetic queries over `target`'s lists: queries of 1–4 terms drawn
  // from its lexicon at log-uniform ranks, in every mode, k 10 and 1000, on each processor alone
  // and (GPU) in batches; about options.calibration_seconds per processor.
  void calibrate(const Target& target);

  void submit(const Target& target, Query query, Clock::time_point deadline, Done done);
  Outcome search(const Target& target, const Query& query, Clock::time_point deadline = Clock::time_point::max());

  bool gpu_usable() const;
  CoreCounters counters() const;
  const CoreOptions& options() const;
  // Seconds `p`'s threads have waited for the scheduler's lock (after runs and wake-ups).
  double lock_wait_seconds(Processor p) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace warp::sched
