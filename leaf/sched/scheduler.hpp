// The leaf's CPU+GPU scheduler at run time (Ding et al. 2009 §9): the decisions of ScheduleCore
// (three queues, stealing, deadlines, batches) driven by real processors. CPU worker threads (by
// default the cores the GPU drivers and the front end leave) each take a run of queries, their
// share of those waiting among the free threads, and answer them one after another; GPU
// driver threads each keep up to their share of the GPU's streams busy with batches (PARA) started
// without waiting (QueryProcessor::start_batch) and poll them, so that a few host threads feed
// every stream and the other cores stay with the CPU's threads. Every run's measured time refines the processor's cost
// model. Queries are submitted with a completion callback, so no thread waits per query; `search` is the blocking form
// for tools and tests. A GPU that fails at run time is given up: its queries and everything queued go to the CPU, with
// one log line and a metric; no query fails for it.
#pragma once
#include <algorithm>
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
  CoreOptions core;  // core.cpu_workers: CPU threads; core.gpu_streams: GPU runs at once
  // Host threads driving the GPU's runs (0: one per stream), each keeping its share of the
  // streams' runs in flight (QueryProcessor::start_batch) and polling them: a thread that waited
  // for each run took a core from the CPU's threads per stream.
  size_t gpu_threads = 0;
  double calibration_seconds = 1;  // start-up calibration per processor, on synthetic queries
  uint64_t seed = 1;               // of the calibration queries
};

// GPU driver threads for `gpu_streams` streams: `wanted` (0: one per stream, at most
// kDefaultGpuDrivers), at most one per stream. With 8 streams on the H200 hosts 4 drivers did best
// on the default corpus's short batches (1.25x 2 drivers) and as well as 1-2 on long ones, while 8
// left too few cores to the CPU's threads (tests/bench/results/scheduler.md).
inline constexpr size_t kDefaultGpuDrivers = 4;
inline size_t gpu_driver_threads(size_t gpu_streams, size_t wanted) {
  if (gpu_streams == 0) return 0;
  return std::clamp<size_t>(wanted == 0 ? std::min(gpu_streams, kDefaultGpuDrivers) : wanted, 1, gpu_streams);
}

// Where a query runs: the partition's index and its processors (gpu null: CPU only). Queries of
// the same `gpu` processor may share a batch. `keep` holds whatever must outlive the query (the
// generation the processors belong to). `gpu_only`: never the CPU's while the GPU is usable (the
// benchmark's "splitgpu", a mixed log's short searches all on the GPU; the leaf never sets it).
struct Target {
  const IndexView* index = nullptr;
  const QueryProcessor* cpu = nullptr;
  const QueryProcessor* gpu = nullptr;
  std::shared_ptr<const void> keep;
  bool gpu_only = false;
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

  // `query` prepared on target.index (its terms found once: the leaf's front ends prepare it), or
  // a bare Query, prepared here.
  void submit(const Target& target, PreparedQuery query, Clock::time_point deadline, Done done);
  void submit(const Target& target, Query query, Clock::time_point deadline, Done done);
  Outcome search(const Target& target, const Query& query, Clock::time_point deadline = Clock::time_point::max());

  bool gpu_usable() const;
  CoreCounters counters() const;
  // What the scheduler would predict now for a query of these features on `p` alone (the GPU's: a
  // batch's fixed cost and the query's share), and how long a query queued now for `p` would wait.
  double predicted_seconds(Processor p, const QueryFeatures& features) const;
  double backlog_seconds(Processor p) const;
  const CoreOptions& options() const;
  // Seconds `p`'s threads have waited for the scheduler's lock (after runs and wake-ups).
  double lock_wait_seconds(Processor p) const;
  // Turns `p`'s threads took at the scheduler's lock after a run or a wake-up (added up every 64
  // turns of a thread and when it parks).
  uint64_t lock_turns(Processor p) const;
  // Seconds the GPU driver threads spent on host work (not polling), summed over the threads.
  double gpu_driver_busy_seconds() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace warp::sched
