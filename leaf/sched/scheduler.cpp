#include "leaf/sched/scheduler.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "common/util/spin_mutex.hpp"
#include "common/util/status.hpp"

namespace warp::sched {

namespace {

using prometheus::Labels;

void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// The warpsearch_leaf_scheduler_* metrics (registered once per registry: prometheus-cpp returns the
// family already there when a second scheduler registers it again).
struct Metrics {
  explicit Metrics(prometheus::Registry& r)
      : depth_family(prometheus::BuildGauge()
                         .Name("warpsearch_leaf_scheduler_queue_depth")
                         .Help("Queries waiting in each of the scheduler's queues")
                         .Register(r)),
        queries_family(prometheus::BuildCounter()
                           .Name("warpsearch_leaf_scheduler_queries_total")
                           .Help("Queries answered, by processor and by the queue they waited in")
                           .Register(r)),
        steals_family(prometheus::BuildCounter()
                          .Name("warpsearch_leaf_scheduler_steals_total")
                          .Help("Queries a processor took from the other processor's queue")
                          .Register(r)),
        probes_family(prometheus::BuildCounter()
                          .Name("warpsearch_leaf_scheduler_probes_total")
                          .Help("Queries a processor that had answered nothing for a while took from the other's queue "
                                "to refresh its cost model")
                          .Register(r)),
        urgent_family(prometheus::BuildCounter()
                          .Name("warpsearch_leaf_scheduler_urgent_total")
                          .Help("Queries taken ahead of their turn because their deadline was near")
                          .Register(r)),
        misses_family(prometheus::BuildCounter()
                          .Name("warpsearch_leaf_scheduler_deadline_misses_total")
                          .Help("Queries past their deadline: expired before starting, or answered late")
                          .Register(r)),
        predicted_family(prometheus::BuildCounter()
                             .Name("warpsearch_leaf_scheduler_predicted_seconds_total")
                             .Help("Dispatch time predicted by the cost models")
                             .Register(r)),
        measured_family(prometheus::BuildCounter()
                            .Name("warpsearch_leaf_scheduler_measured_seconds_total")
                            .Help("Dispatch time measured")
                            .Register(r)),
        ratio_family(prometheus::BuildHistogram()
                         .Name("warpsearch_leaf_scheduler_prediction_ratio")
                         .Help("Measured over predicted run time, per run")
                         .Register(r)),
        backlog_family(prometheus::BuildGauge()
                           .Name("warpsearch_leaf_scheduler_backlog_seconds")
                           .Help("Predicted wait before a query queued now would start, per processor")
                           .Register(r)),
        lock_wait_family(prometheus::BuildCounter()
                             .Name("warpsearch_leaf_scheduler_lock_wait_seconds_total")
                             .Help("Time the scheduler's threads waited for its lock after a run or a wake-up")
                             .Register(r)),
        batch_size(prometheus::BuildHistogram()
                       .Name("warpsearch_leaf_scheduler_batch_queries")
                       .Help("Queries per GPU run")
                       .Register(r)
                       .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64})),
        gpu_usable(prometheus::BuildGauge()
                       .Name("warpsearch_leaf_scheduler_gpu_usable")
                       .Help("1 while the scheduler sends queries to the GPU")
                       .Register(r)
                       .Add({})),
        gpu_failures(prometheus::BuildCounter()
                         .Name("warpsearch_leaf_scheduler_gpu_failures_total")
                         .Help("GPU runs that failed (their queries were answered on the CPU)")
                         .Register(r)
                         .Add({})),
        driver_busy(prometheus::BuildCounter()
                        .Name("warpsearch_leaf_scheduler_gpu_driver_busy_seconds_total")
                        .Help("Host work of the GPU driver threads (starting batches, their phases, answering them), "
                              "polling excluded")
                        .Register(r)
                        .Add({})) {
    for (QueueId q : {QueueId::kCpu, QueueId::kGpu, QueueId::kFlexible})
      depth[static_cast<size_t>(q)] = &depth_family.Add({{"queue", to_string(q)}});
    for (Processor p : {Processor::kCpu, Processor::kGpu}) {
      const size_t i = static_cast<size_t>(p);
      const std::string name = to_string(p);
      steals[i] = &steals_family.Add({{"processor", name}});
      probes[i] = &probes_family.Add({{"processor", name}});
      urgent[i] = &urgent_family.Add({{"processor", name}});
      predicted[i] = &predicted_family.Add({{"processor", name}});
      measured[i] = &measured_family.Add({{"processor", name}});
      ratio[i] = &ratio_family.Add({{"processor", name}},
                                   prometheus::Histogram::BucketBoundaries{0.25, 0.5, 0.67, 0.8, 1, 1.25, 1.5, 2, 4});
      backlog[i] = &backlog_family.Add({{"processor", name}});
      lock_wait[i] = &lock_wait_family.Add({{"processor", name}});
      for (QueueId q : {QueueId::kCpu, QueueId::kGpu, QueueId::kFlexible}) {
        queries[i][static_cast<size_t>(q)] = &queries_family.Add({{"processor", name}, {"queue", to_string(q)}});
      }
    }
    expired = &misses_family.Add({{"when", "before_start"}});
    late = &misses_family.Add({{"when", "answered_late"}});
  }
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
PendingPtr adopt(const Job& job) { return PendingPtr(static_cast<Pending*>(job.payload)); }

size_t group_of(const Target& target) {
  return reinterpret_cast<uintptr_t>(target.gpu != nullptr ? static_cast<const void*>(target.gpu) : target.cpu);
}

}  // namespace

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

// Under `mutex`: the submitted queries join the core's queues; returns the parked threads to wake
// for them (woken by the caller once `mutex` is released, so they do not wake into a held lock).
std::vector<Scheduler::State::Parker*> Scheduler::State::drain() {
  {
    std::lock_guard<SpinMutex> handoff(handoff_mutex);
    if (inbox.empty()) return {};
    draining.swap(inbox);
    inbox_filled.store(false, std::memory_order_relaxed);
  }
  for (Incoming& in : draining) {
    Job job;
    job.id = in.id;
    job.slot = group_of(in.pending->target);
    job.features = in.features;
    job.arrival = in.arrival;
    job.deadline = seconds(in.pending->deadline);
    job.cpu_only = in.pending->target.gpu == nullptr;
    job.gpu_only = in.pending->target.gpu_only;
    job.payload = in.pending.release();
    core.enqueue(job);
  }
  draining.clear();
  update_gauges();
  return unpark_for_queued();
}

// Under `mutex`: parked threads for the work queued now, less those already woken and on their
// way: a CPU thread per query of the CPU's queue (and of the flexible one while no GPU stream is
// parked to take it), a GPU stream per batch's worth of the GPU's and the flexible queue. Waking a
// CPU thread for every flexible query too (13 of them on the H100 host) woke herds that mostly
// found the queries batched away, and their turns at the lock delayed the GPU's streams.
std::vector<Scheduler::State::Parker*> Scheduler::State::unpark_for_queued() {
  const size_t flexible = core.depth(QueueId::kFlexible);
  const size_t for_gpu = core.gpu_usable() ? core.depth(QueueId::kGpu) + flexible : 0;
  std::vector<Parker*> woken;
  std::lock_guard<SpinMutex> handoff(handoff_mutex);
  std::array<size_t, 2> want{core.depth(QueueId::kCpu) + (parked[1].empty() ? flexible : 0),
                             for_gpu == 0 ? 0 : 1 + (for_gpu - 1) / core.options().batch_max};
  for (size_t p = 0; p < 2; ++p) {
    for (want[p] -= std::min(want[p], waking[p]); want[p] > 0 && !parked[p].empty(); --want[p]) {
      woken.push_back(parked[p].back());
      parked[p].pop_back();
      ++waking[p];
    }
  }
  return woken;
}

void Scheduler::State::unpark(const std::vector<Parker*>& parkers) {
  for (Parker* parker : parkers) {
    // Notified under its mutex: once the parked thread has its token it may leave and destroy
    // the Parker, which it cannot do before this unlock.
    std::lock_guard<std::mutex> lock(parker->mutex);
    parker->token = true;
    parker->cv.notify_one();
  }
}

// With `mutex` held on entry and on return: sleeps until woken or 2 ms have passed, unless
// queries are already waiting in the inbox.
void Scheduler::State::park(Parker& self, Processor p, std::unique_lock<SpinMutex>& lock, LockWaits& waits) {
  const size_t pi = static_cast<size_t>(p);
  {
    std::lock_guard<SpinMutex> handoff(handoff_mutex);
    if (!inbox.empty() || stop) return;
    parked[pi].push_back(&self);
  }
  update_gauges(/*force=*/true);
  lock.unlock();
  flush(waits, p);
  bool woken = false;
  {
    std::unique_lock<std::mutex> own(self.mutex);
    if (!self.cv.wait_for(own, std::chrono::milliseconds(2), [&] { return self.token; })) {
      own.unlock();
      bool listed = false;
      {
        std::lock_guard<SpinMutex> handoff(handoff_mutex);
        auto it = std::find(parked[pi].begin(), parked[pi].end(), &self);
        listed = it != parked[pi].end();
        if (listed) parked[pi].erase(it);
      }
      own.lock();
      // Taken off the list by a waker meanwhile: its token is on the way; wait for it, so that
      // no token is left over for the next park.
      if (!listed) self.cv.wait(own, [&] { return self.token; });
    }
    woken = self.token;
    self.token = false;
  }
  if (woken) {
    std::lock_guard<SpinMutex> handoff(handoff_mutex);
    --waking[pi];
  }
  relock(lock, p, waits);
}

void Scheduler::State::fail_expired(std::unique_lock<SpinMutex>& lock) {
  std::vector<Job> expired = core.take_expired();
  if (expired.empty()) return;
  if (metrics) metrics->expired->Increment(static_cast<double>(expired.size()));
  lock.unlock();
  for (const Job& job : expired) {
    const PendingPtr w = adopt(job);
    Outcome outcome;
    outcome.error = "deadline exceeded before the query started";
    w->done(std::move(outcome));
  }
  lock.lock();
}

// The GPU failed a run: no more GPU work; the run's queries go back, first in the CPU's queue.
void Scheduler::State::gpu_failed(Dispatch& run, std::vector<PendingPtr>& work, const std::string& why,
                                  std::unique_lock<SpinMutex>& lock) {
  lock.lock();
  core.finished(run, 0);
  core.gpu_lost();
  if (!gpu_failure_logged) {
    gpu_failure_logged = true;
    std::fprintf(stderr, "warp-leaf: scheduler: the GPU failed (%s); every query on the CPU from now on\n",
                 why.c_str());
  }
  if (metrics) metrics->gpu_failures.Increment();
  for (size_t i = 0; i < run.jobs.size(); ++i) {
    run.jobs[i].payload = work[i].release();
    core.enqueue(run.jobs[i]);
  }
  update_gauges(/*force=*/true);
  const std::vector<Parker*> woken = unpark_for_queued();
  lock.unlock();
  unpark(woken);
  lock.lock();
}

// A CPU worker: takes a run (one query, or a few short ones), answers it, and so on; parks when
// there is nothing to take.
void Scheduler::State::cpu_loop() {
  constexpr Processor p = Processor::kCpu;
  Parker self;
  LockWaits waits;
  std::vector<PendingPtr> work;
  std::unique_lock<SpinMutex> lock(mutex);
  for (;;) {
    const std::vector<Parker*> woken = drain();
    Dispatch run = core.take(p, now());
    fail_expired(lock);
    if (run.jobs.empty()) {
      if (!woken.empty()) {
        lock.unlock();
        unpark(woken);
        lock.lock();
        continue;
      }
      // At the end, a thread leaves once nothing is left.
      if (stop && core.waiting() == 0) {
        std::lock_guard<SpinMutex> handoff(handoff_mutex);
        if (inbox.empty()) return;
        continue;
      }
      park(self, p, lock, waits);
      continue;
    }
    for (const Job& job : run.jobs) work.push_back(adopt(job));
    const CostModel::Snapshot fit = core.model(p).snapshot();  // the run's observations weighed against it
    update_gauges();
    lock.unlock();
    unpark(woken);
    const std::vector<double> each = run_on_cpu(run, work);
    work.clear();  // the answered queries freed outside the lock
    // The run's observations folded here, outside the lock: the model's own update was the largest
    // part of a CPU thread's turn at the lock (CostModel::observe and its refits, ~3% of the H200
    // host's samples at 288k queries/s on the default corpus; folded, +15-31%, tests/bench/results/scheduler.md).
    // fold() reads only the model's fading factor, fixed at construction, and the snapshot.
    FoldedObservations folded;
    double total = 0;
    for (size_t i = 0; i < each.size(); ++i) {
      core.model(p).fold(folded, fit, std::span(&run.jobs[i].features, 1), each[i]);
      total += each[i];
    }
    relock(lock, p, waits);
    core.finished(run, total, each, &folded);
    update_gauges();
  }
}

// A GPU run in flight: its queries, and the batch started on the GPU processor.
struct Scheduler::State::Flight {
  Dispatch run;
  std::vector<PendingPtr> work;
  std::vector<PreparedQuery> queries;  // moved out of `work` for the batch to read until it is answered
  std::unique_ptr<BatchRun> batch;
  Clock::time_point start;
  void queries_back() {  // before the work goes back to the queues (the batch gone)
    for (size_t i = 0; i < queries.size(); ++i) work[i]->query = std::move(queries[i]);
  }
};

// A GPU driver: keeps up to `slots` runs in flight. Under the lock it takes runs while a slot is
// free; outside it starts them (the batch's first phase launched, nothing waited for) and polls
// every run in flight, answering each as it completes, until one completes or a free slot has
// work to take (new arrivals, or 20 µs passed: queued work, a steal or an urgent query may be due
// without any arrival). With nothing in flight and nothing to take it parks like a CPU thread.
void Scheduler::State::gpu_loop(size_t slots) {
  constexpr auto kRetake = std::chrono::microseconds(20);
  constexpr int kPollPauses = 32;
  Parker self;
  LockWaits waits;
  std::vector<std::unique_ptr<Flight>> flights, started;
  // Runs answered since the driver last held the lock, recorded at its next turn: one turn for
  // the runs it finished and the ones it takes (the lock, shared with every CPU thread, was where
  // a driver's time went on short batches: 4-14 µs a query under load, tests/bench/results/scheduler.md).
  std::vector<std::pair<Dispatch, double>> finished;
  std::unique_lock<SpinMutex> lock(mutex);
  for (;;) {
    for (const auto& [run, seconds] : finished) core.finished(run, seconds);
    if (!finished.empty()) update_gauges();
    finished.clear();
    std::vector<Parker*> woken = drain();
    while (flights.size() + started.size() < slots) {
      Dispatch run = core.take(Processor::kGpu, now());
      if (run.jobs.empty()) break;
      auto flight = std::make_unique<Flight>();
      for (const Job& job : run.jobs) flight->work.push_back(adopt(job));
      flight->run = std::move(run);
      started.push_back(std::move(flight));
    }
    fail_expired(lock);
    if (flights.empty() && started.empty()) {
      if (!woken.empty()) {
        lock.unlock();
        unpark(woken);
        lock.lock();
        continue;
      }
      if (!core.gpu_usable()) return;  // a lost GPU takes nothing more
      if (stop && core.waiting() == 0) {
        std::lock_guard<SpinMutex> handoff(handoff_mutex);
        if (inbox.empty()) return;
        continue;
      }
      park(self, Processor::kGpu, lock, waits);
      continue;
    }
    if (!started.empty()) update_gauges();
    lock.unlock();
    unpark(woken);
    const auto busy_since = Clock::now();
    for (auto& flight : started) {
      for (PendingPtr& w : flight->work) flight->queries.push_back(std::move(w->query));
      flight->start = Clock::now();
      try {
        flight->batch = flight->work[0]->target.gpu->start_batch(flight->queries);
        flights.push_back(std::move(flight));
      } catch (const std::exception& e) {
        flight->queries_back();
        gpu_failed(flight->run, flight->work, e.what(), lock);
        lock.unlock();
      }
    }
    started.clear();
    const auto polling_since = Clock::now();
    add_driver_busy(std::chrono::duration<double>(polling_since - busy_since).count());
    for (bool completed = false; !flights.empty() && !completed;) {
      for (size_t i = 0; i < flights.size();) {
        Flight& flight = *flights[i];
        bool ready = false;
        const auto poll_start = Clock::now();
        try {
          ready = flight.batch->poll();
          if (ready) {
            std::vector<QueryResult> results = flight.batch->take();
            finished.emplace_back(std::move(flight.run), answer_gpu_run(flight, std::move(results), Clock::now()));
            // The run's host work: its last phase's answers read, answered, and its phases before.
            add_driver_busy(std::chrono::duration<double>(Clock::now() - poll_start).count() +
                            flight.batch->between_phases_seconds());
          }
        } catch (const std::exception& e) {
          flight.batch.reset();  // its executor drained and returned before the queries go back
          flight.queries_back();
          gpu_failed(flight.run, flight.work, e.what(), lock);
          lock.unlock();
          ready = true;
        }
        if (!ready) {
          ++i;
          continue;
        }
        flights.erase(flights.begin() + static_cast<std::ptrdiff_t>(i));
        completed = true;
      }
      if (flights.size() < slots &&
          (inbox_filled.load(std::memory_order_relaxed) || Clock::now() - polling_since >= kRetake)) {
        break;
      }
      if (!completed) {
        // Nothing finished: a pause (1-5 µs) before the next sweep, so that the drivers' polls
        // (calls into the CUDA driver, under its locks) crowd the other drivers' launches less.
        for (int i = 0; i < kPollPauses; ++i) cpu_pause();
      }
    }
    relock(lock, Processor::kGpu, waits);
  }
}

// Without the lock: a GPU run's answers delivered and its metrics.
double Scheduler::State::answer_gpu_run(Flight& flight, std::vector<QueryResult>&& results, Clock::time_point end) {
  const Dispatch& run = flight.run;
  const double seconds_taken = std::chrono::duration<double>(end - flight.start).count();
  size_t late = 0;
  for (size_t i = 0; i < flight.work.size(); ++i) {
    late += end > flight.work[i]->deadline;
    Outcome outcome;
    outcome.result = std::move(results[i]);
    outcome.processor = Processor::kGpu;
    outcome.queue = run.jobs[i].queue;
    outcome.seconds = seconds_taken;
    outcome.predicted = run.predicted;
    outcome.batch = run.jobs.size();
    outcome.stolen = run.jobs[i].stolen;
    outcome.urgent = run.jobs[i].urgent;
    flight.work[i]->done(std::move(outcome));
  }
  if (metrics) {  // prometheus-cpp's own locks: outside the scheduler's
    metrics->predicted[1]->Increment(run.predicted);
    metrics->measured[1]->Increment(seconds_taken);
    metrics->ratio[1]->Observe(seconds_taken / run.predicted);
    metrics->batch_size.Observe(static_cast<double>(run.jobs.size()));
    for (const Job& job : run.jobs) {
      metrics->queries[1][static_cast<size_t>(job.queue)]->Increment();
      if (job.stolen) metrics->steals[1]->Increment();
      if (job.probe) metrics->probes[1]->Increment();
      if (job.urgent) metrics->urgent[1]->Increment();
    }
    if (late > 0) metrics->late->Increment(static_cast<double>(late));
  }
  return seconds_taken;
}

// Without the lock: a CPU run's queries one after another, each answered as soon as it is done.
// Returns each one's time.
std::vector<double> Scheduler::State::run_on_cpu(const Dispatch& run, std::vector<PendingPtr>& work) {
  std::vector<double> each;
  each.reserve(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    const Job& job = run.jobs[i];
    Outcome outcome;
    const auto start = Clock::now();
    try {
      outcome.result = work[i]->target.cpu->search(work[i]->query);
    } catch (const std::exception& e) {
      outcome.error = std::string("query failed: ") + e.what();
    }
    const auto end = Clock::now();
    each.push_back(std::chrono::duration<double>(end - start).count());
    const bool late = outcome.error.empty() && end > work[i]->deadline;
    outcome.processor = Processor::kCpu;
    outcome.queue = job.queue;
    outcome.seconds = each.back();
    outcome.predicted = job.cpu_seconds;
    outcome.stolen = job.stolen;
    outcome.urgent = job.urgent;
    const bool answered = outcome.error.empty();
    work[i]->done(std::move(outcome));
    if (metrics && answered) {  // prometheus-cpp's own locks: outside the scheduler's
      metrics->predicted[0]->Increment(job.cpu_seconds);
      metrics->measured[0]->Increment(each.back());
      metrics->ratio[0]->Observe(each.back() / job.cpu_seconds);
      metrics->queries[0][static_cast<size_t>(job.queue)]->Increment();
      if (job.stolen) metrics->steals[0]->Increment();
      if (job.probe) metrics->probes[0]->Increment();
      if (job.urgent) metrics->urgent[0]->Increment();
      if (late) metrics->late->Increment();
    }
  }
  return each;
}

Scheduler::Scheduler(SchedulerOptions options, std::shared_ptr<prometheus::Registry> registry)
    : state_(std::make_unique<State>(options, std::move(registry))) {
  {
    std::lock_guard<SpinMutex> lock(state_->mutex);
    state_->update_gauges(/*force=*/true);
  }
  const CoreOptions& core = state_->core.options();
  // Named for top and perf (`perf report --sort comm`): the CPU's workers and the GPU's drivers.
  for (size_t i = 0; i < core.cpu_workers; ++i) {
    state_->threads.emplace_back([this] {
      pthread_setname_np(pthread_self(), "warp-sched-cpu");
      state_->cpu_loop();
    });
  }
  // The streams shared among the drivers: thread i keeps streams / threads of them busy, or one more.
  const size_t drivers = gpu_driver_threads(core.gpu_streams, options.gpu_threads);
  for (size_t i = 0; i < drivers; ++i) {
    const size_t slots = core.gpu_streams / drivers + (i < core.gpu_streams % drivers ? 1 : 0);
    state_->threads.emplace_back([this, slots] {
      pthread_setname_np(pthread_self(), "warp-sched-gpu");
      state_->gpu_loop(slots);
    });
  }
}

Scheduler::~Scheduler() {
  std::vector<State::Parker*> woken;
  {
    std::lock_guard<SpinMutex> lock(state_->mutex);
    std::lock_guard<SpinMutex> handoff(state_->handoff_mutex);
    state_->stop = true;
    for (size_t p = 0; p < 2; ++p) {
      state_->waking[p] += state_->parked[p].size();
      woken.insert(woken.end(), state_->parked[p].begin(), state_->parked[p].end());
      state_->parked[p].clear();
    }
  }
  State::unpark(woken);
  for (auto& thread : state_->threads) thread.join();
}

void Scheduler::submit(const Target& target, Query query, Clock::time_point deadline, Done done) {
  if (target.index == nullptr) throw Error("scheduler: a target needs an index and a CPU processor");
  submit(target, prepare_query(std::move(query), *target.index), deadline, std::move(done));
}

void Scheduler::submit(const Target& target, PreparedQuery prepared, Clock::time_point deadline, Done done) {
  if (target.index == nullptr || target.cpu == nullptr)
    throw Error("scheduler: a target needs an index and a CPU processor");
  if (prepared.index != target.index) prepared = prepare_query(std::move(prepared.query), *target.index);
  const QueryFeatures features = features_of(prepared);  // the lists' headers read: outside any lock
  const double arrival = state_->now();
  const uint64_t id = state_->next_id++;
  auto pending = std::make_unique<Pending>(Pending{target, std::move(prepared), std::move(done), deadline});
  // One parked thread is woken to drain the inbox, unless one is already on its way: a GPU stream
  // where the query can go to the GPU and a stream is idle, else a CPU thread. The drainer
  // classifies the queries and wakes the threads their queues call for, so a burst of submissions
  // costs the submitter one wake-up, not one per query.
  State::Parker* woken = nullptr;
  {
    std::lock_guard<SpinMutex> handoff(state_->handoff_mutex);
    if (state_->stop) throw Error("scheduler: stopping");
    state_->inbox.push_back({id, std::move(pending), features, arrival});
    state_->inbox_filled.store(true, std::memory_order_relaxed);
    if (state_->waking[0] + state_->waking[1] == 0) {
      const Policy policy = state_->core.options().policy;  // fixed at construction
      auto& gpu = state_->parked[1];
      auto& cpu = state_->parked[0];
      const bool gpu_first = target.gpu != nullptr && policy != Policy::kCpuOnly && !gpu.empty();
      auto& from = gpu_first ? gpu : !cpu.empty() && policy != Policy::kGpuOnly ? cpu : gpu;
      if (!from.empty()) {
        woken = from.back();
        from.pop_back();
        ++state_->waking[&from == &gpu ? 1 : 0];
      }
    }
  }
  if (woken != nullptr) State::unpark({woken});
}

Outcome Scheduler::search(const Target& target, const Query& query, Clock::time_point deadline) {
  std::promise<Outcome> promise;
  auto future = promise.get_future();
  submit(target, query, deadline, [&promise](Outcome&& outcome) { promise.set_value(std::move(outcome)); });
  return future.get();
}

bool Scheduler::gpu_usable() const {
  std::lock_guard<SpinMutex> lock(state_->mutex);
  return state_->core.gpu_usable();
}

CoreCounters Scheduler::counters() const {
  std::lock_guard<SpinMutex> lock(state_->mutex);
  return state_->core.counters();
}

double Scheduler::predicted_seconds(Processor p, const QueryFeatures& features) const {
  std::lock_guard<SpinMutex> lock(state_->mutex);
  const CostModel& model = state_->core.model(p);
  return p == Processor::kCpu ? model.predict(features) : model.fixed_cost() + model.predict_marginal(features);
}

double Scheduler::backlog_seconds(Processor p) const {
  std::lock_guard<SpinMutex> lock(state_->mutex);
  return state_->core.backlog(p);
}

const CoreOptions& Scheduler::options() const { return state_->core.options(); }

double Scheduler::gpu_driver_busy_seconds() const { return static_cast<double>(state_->driver_busy_ns) * 1e-9; }

uint64_t Scheduler::lock_turns(Processor p) const { return state_->lock_turns[static_cast<size_t>(p)]; }

double Scheduler::lock_wait_seconds(Processor p) const {
  return static_cast<double>(state_->lock_wait_ns[static_cast<size_t>(p)]) * 1e-9;
}

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
