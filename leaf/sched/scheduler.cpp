#include "leaf/sched/scheduler.hpp"

#include <algorithm>
#include <cstdio>
#include <future>

#include "common/util/status.hpp"
#include "leaf/sched/scheduler_state.hpp"

namespace warp::sched {

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

}  // namespace warp::sched
