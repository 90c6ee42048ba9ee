// The scheduler's state shared by its files (scheduler.cpp: submission, queues and parking;
// scheduler_workers.cpp: the CPU and GPU threads; scheduler_calibration.cpp; scheduler_metrics.cpp).
// Private to leaf/sched.
#pragma once
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/util/spin_mutex.hpp"
#include "leaf/sched/scheduler.hpp"

namespace warp::sched {
namespace detail {

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// The warpsearch_leaf_scheduler_* metrics (registered once per registry: prometheus-cpp returns the
// family already there when a second scheduler registers it again).
struct Metrics {
  explicit Metrics(prometheus::Registry& r);  // scheduler_metrics.cpp
  prometheus::Family<prometheus::Gauge>& depth_family;
  prometheus::Family<prometheus::Counter>& queries_family;
  prometheus::Family<prometheus::Counter>& steals_family;
  prometheus::Family<prometheus::Counter>& probes_family;
  prometheus::Family<prometheus::Counter>& urgent_family;
  prometheus::Family<prometheus::Counter>& misses_family;
  prometheus::Family<prometheus::Counter>& predicted_family;
  prometheus::Family<prometheus::Counter>& measured_family;
  prometheus::Family<prometheus::Histogram>& ratio_family;
  prometheus::Family<prometheus::Gauge>& backlog_family;
  prometheus::Family<prometheus::Counter>& lock_wait_family;
  prometheus::Histogram& batch_size;
  prometheus::Gauge& gpu_usable;
  prometheus::Counter& gpu_failures;
  prometheus::Counter& driver_busy;
  std::array<prometheus::Gauge*, 3> depth{};
  std::array<std::array<prometheus::Counter*, 3>, 2> queries{};
  std::array<prometheus::Counter*, 2> steals{}, probes{}, urgent{}, predicted{}, measured{}, lock_wait{};
  std::array<prometheus::Histogram*, 2> ratio{};
  std::array<prometheus::Gauge*, 2> backlog{};
  prometheus::Counter* expired = nullptr;
  prometheus::Counter* late = nullptr;
};

struct Pending {
  Target target;
  PreparedQuery query;  // prepared once, at submission, for the cost model and either processor
  Scheduler::Done done;
  Scheduler::Clock::time_point deadline;
};
// Allocated by the submitter (outside every lock), carried through the core as its job's payload,
// freed once answered: the decisions under the lock move pointers, not queries, and allocate nothing.
using PendingPtr = std::unique_ptr<Pending>;
inline PendingPtr adopt(const Job& job) { return PendingPtr(static_cast<Pending*>(job.payload)); }

inline size_t group_of(const Target& target) {
  return reinterpret_cast<uintptr_t>(target.gpu != nullptr ? static_cast<const void*>(target.gpu) : target.cpu);
}

}  // namespace detail

using detail::adopt;
using detail::cpu_pause;
using detail::group_of;
using detail::Metrics;
using detail::Pending;
using detail::PendingPtr;

struct Scheduler::State {
  SchedulerOptions options;
  ScheduleCore core;
  const Clock::time_point epoch = Clock::now();
  // `mutex` guards the decisions (core); `handoff_mutex` only the inbox of submitted
  // queries and the list of parked threads, held for a push or a swap. Submitting never takes
  // `mutex`: on the H100 host, with 13 CPU threads and 2 GPU streams cycling through it, a
  // submitter that blocked on it slept and waited for a wake-up each time (15-65 µs a search
  // instead of ~4), and at 20-40k queries/s the leaf's front end (the benchmark's load generator)
  // fell behind its arrivals. Lock order: `mutex`, then `handoff_mutex`.
  mutable SpinMutex mutex;
  SpinMutex handoff_mutex;
  struct Incoming {
    uint64_t id;
    PendingPtr pending;
    QueryFeatures features;
    double arrival;
  };
  std::vector<Incoming> inbox, draining;  // draining: the swapped-out inbox, reused
  // Whether the inbox holds queries (a hint read without the lock by GPU drivers polling runs).
  std::atomic<bool> inbox_filled{false};
  // A parked thread sleeps on its own condition variable until woken with a token, or for 2 ms
  // (a steal may become worthwhile, or a deadline near, without any new arrival).
  struct Parker {
    std::mutex mutex;
    std::condition_variable cv;
    bool token = false;
  };
  std::array<std::vector<Parker*>, 2> parked;  // by processor, under handoff_mutex
  // Woken and not yet back at work, by processor: each drains the inbox when it runs.
  std::array<size_t, 2> waking{};
  // Nanoseconds threads waited for `mutex` after a run or a wake-up, by processor: the
  // scheduler's own cost to the cores, in warpsearch_leaf_scheduler_lock_wait_seconds_total.
  std::array<std::atomic<uint64_t>, 2> lock_wait_ns{};
  std::array<std::atomic<uint64_t>, 2> lock_turns{};  // the turns those waits were for
  // Nanoseconds GPU drivers spent on host work (starting runs, their phases' host work, answering
  // them), not polling: what a driver thread's core gives the GPU.
  std::atomic<uint64_t> driver_busy_ns{0};
  void add_driver_busy(double seconds) {
    driver_busy_ns += static_cast<uint64_t>(seconds * 1e9);
    if (metrics) metrics->driver_busy.Increment(seconds);
  }
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stop{false};
  bool gpu_failure_logged = false;
  std::shared_ptr<prometheus::Registry> registry;  // keeps the metrics below alive
  std::unique_ptr<Metrics> metrics;
  std::vector<std::thread> threads;

  State(SchedulerOptions o, std::shared_ptr<prometheus::Registry> r)
      : options(o), core(o.core), registry(std::move(r)) {
    if (registry) metrics = std::make_unique<Metrics>(*registry);
  }
  double seconds(Clock::time_point t) const {
    if (t == Clock::time_point::max()) return 1e12;
    return std::chrono::duration<double>(t - epoch).count();
  }
  double now() const { return seconds(Clock::now()); }
  // Under the mutex. Set at most every kGaugeEvery (each Set writes cache lines that every thread
  // writes, while the others wait for the lock), and always (`force`) before a thread parks, so
  // an idle scheduler shows its state.
  static constexpr double kGaugeEvery = 1e-3;
  double next_gauges = 0;
  void update_gauges(bool force = false) {
    if (!metrics) return;
    const double t = now();
    if (!force && t < next_gauges) return;
    next_gauges = t + kGaugeEvery;
    for (QueueId q : {QueueId::kCpu, QueueId::kGpu, QueueId::kFlexible})
      metrics->depth[static_cast<size_t>(q)]->Set(static_cast<double>(core.depth(q)));
    metrics->backlog[0]->Set(core.backlog(Processor::kCpu));
    metrics->backlog[1]->Set(core.gpu_usable() ? core.backlog(Processor::kGpu) : 0);
    metrics->gpu_usable.Set(core.gpu_usable() ? 1 : 0);
  }
  // GPU drivers waiting for `mutex`: CPU threads let them take it first. A driver's turn feeds a
  // batch of queries to the GPU; among 11-13 CPU threads spinning for it, drivers waited 4-14 µs a
  // query on the default corpus (H200 host), a batch's worth of GPU work for every turn.
  std::atomic<int> drivers_waiting{0};
  // A thread's lock waits, added to the shared counters every kWaitFlushTurns turns and before it
  // parks (adding at every turn wrote cache lines every thread writes, under the lock).
  static constexpr unsigned kWaitFlushTurns = 64;
  struct LockWaits {
    uint64_t ns = 0;
    unsigned turns = 0, flushed_turns = 0;
  };
  void flush(LockWaits& waits, Processor p) {
    lock_turns[static_cast<size_t>(p)] += waits.turns - waits.flushed_turns;
    waits.flushed_turns = waits.turns;
    if (waits.ns == 0) return;
    lock_wait_ns[static_cast<size_t>(p)] += waits.ns;
    if (metrics) metrics->lock_wait[static_cast<size_t>(p)]->Increment(static_cast<double>(waits.ns) * 1e-9);
    waits.ns = 0;
  }
  void relock(std::unique_lock<SpinMutex>& lock, Processor p, LockWaits& waits) {
    const auto start = Clock::now();
    if (p == Processor::kGpu) {
      drivers_waiting.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      drivers_waiting.fetch_sub(1, std::memory_order_relaxed);
    } else {
      lock.release();  // unlocked: it only lets go of the mutex, taken again below, behind the drivers
      mutex.lock_behind(drivers_waiting);
      lock = std::unique_lock<SpinMutex>(mutex, std::adopt_lock);
    }
    waits.ns +=
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    if (++waits.turns % kWaitFlushTurns == 0) flush(waits, p);
  }
  std::vector<Parker*> drain();
  std::vector<Parker*> unpark_for_queued();
  static void unpark(const std::vector<Parker*>& parkers);
  void park(Parker& self, Processor p, std::unique_lock<SpinMutex>& lock, LockWaits& waits);
  void cpu_loop();
  struct Flight;
  void gpu_loop(size_t slots);
  // Returns the run's seconds, for ScheduleCore::finished at the driver's next turn at the lock.
  double answer_gpu_run(Flight& flight, std::vector<QueryResult>&& results, Clock::time_point end);
  std::vector<double> run_on_cpu(const Dispatch& run, std::vector<PendingPtr>& work);
  void fail_expired(std::unique_lock<SpinMutex>& lock);
  void gpu_failed(Dispatch& run, std::vector<PendingPtr>& work, const std::string& why,
                  std::unique_lock<SpinMutex>& lock);
};

}  // namespace warp::sched
