// The scheduler's threads: CPU workers and GPU drivers, and how each answers the runs it takes.
#include <algorithm>
#include <cstdio>
#include <future>
#include <random>

#include "common/util/status.hpp"
#include "leaf/sched/scheduler_state.hpp"

namespace warp::sched {
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

}  // namespace warp::sched
