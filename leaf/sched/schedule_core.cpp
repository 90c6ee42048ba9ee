#include "leaf/sched/schedule_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/util/status.hpp"

namespace warp::sched {

const char* to_string(Processor p) { return p == Processor::kCpu ? "cpu" : "gpu"; }
const char* to_string(QueueId q) { return q == QueueId::kCpu ? "cpu" : q == QueueId::kGpu ? "gpu" : "flexible"; }

Policy parse_policy(std::string_view text) {
  if (text == "scheduler") return Policy::kScheduler;
  if (text == "cpu") return Policy::kCpuOnly;
  if (text == "gpu") return Policy::kGpuOnly;
  if (text == "best-serial") return Policy::kBestOneAtATime;
  throw Error("policy must be scheduler, cpu, gpu or best-serial, not '" + std::string(text) + "'");
}

namespace {
constexpr double kMillisecond = 1e-3;
// The scheduler looks at most this far into a queue (oldest first) for urgent, short or stealable
// queries: decisions stay O(1) under the lock however long a queue grows under overload.
constexpr ptrdiff_t kWindow = 64;
std::deque<Job>::iterator window_end(std::deque<Job>& q) { return q.size() <= kWindow ? q.end() : q.begin() + kWindow; }
Processor other(Processor p) { return p == Processor::kCpu ? Processor::kGpu : Processor::kCpu; }
QueueId own_queue(Processor p) { return p == Processor::kCpu ? QueueId::kCpu : QueueId::kGpu; }
}  // namespace

ScheduleCore::ScheduleCore(CoreOptions options) : options_(options) {
  options_.cpu_workers = std::max<size_t>(1, options_.cpu_workers);
  options_.batch_max = std::max<size_t>(1, options_.batch_max);
  if (options_.policy == Policy::kGpuOnly && options_.gpu_streams == 0) throw Error("policy gpu needs a GPU");
}

size_t ScheduleCore::capacity(Processor p) const {
  return p == Processor::kCpu ? options_.cpu_workers : std::max<size_t>(1, options_.gpu_streams);
}

// How long a query queued now for `p` would wait before it starts: the predicted work queued
// ahead of it and in progress, spread over the processor's workers (CPU threads, GPU streams).
// Counting the work in progress even while a worker is free makes a processor look busier as its
// load grows, so queries move to the other one before its queue forms, not after. The GPU's
// queue counts by the queries' shares of a batch: one batch clears many.
// While every worker is busy, the age of the oldest query waiting for the processor bounds the
// backlog from below: predictions assume every worker runs flat out, and when a processor drains
// slower than its model says (its threads preempted on a full machine, memory bandwidth shared
// with the other processor), the predicted backlog stays short while its queue grows. On the H100
// host at 51k q/s on the default corpus the CPU's queue waited 19 ms against a predicted backlog
// under 1 ms, and kept half the queries.
double ScheduleCore::backlog(Processor p) const {
  const size_t i = static_cast<size_t>(p);
  const double predicted = (running_seconds_[i] + queued_seconds_[i]) / static_cast<double>(capacity(p));
  if (busy_[i] < capacity(p)) return predicted;  // a worker is free: what waits is about to start
  double waited = 0;
  for (QueueId q : {own_queue(p), QueueId::kFlexible}) {
    const std::deque<Job>& jobs = queues_[static_cast<size_t>(q)];
    if (!jobs.empty()) waited = std::max(waited, clock_ - jobs.front().arrival);
  }
  return std::max(predicted, waited);
}

double ScheduleCore::predicted(const Job& job, Processor p) const {
  return p == Processor::kCpu ? job.cpu_seconds : model(Processor::kGpu).fixed_cost() + job.gpu_seconds;
}

// Work waiting for each processor: its own queue's, and the flexible queue's on both (either may
// take it; leaving it out hid a growing flexible queue from both backlogs).
void ScheduleCore::account_queued(const Job& job, int sign) {
  if (job.queue != QueueId::kGpu) queued_seconds_[0] += sign * job.cpu_seconds;
  if (job.queue != QueueId::kCpu) queued_seconds_[1] += sign * job.gpu_seconds;
}

QueueId ScheduleCore::enqueue(Job job) {
  clock_ = std::max(clock_, job.arrival);
  job.cpu_seconds = model(Processor::kCpu).predict(job.features);
  QueueId q = QueueId::kCpu;
  if (gpu_usable() && !job.cpu_only) {
    const CostModel& gpu = model(Processor::kGpu);
    job.gpu_seconds = gpu.predict_marginal(job.features);
    // When the query would be answered: on the CPU after its backlog; on the GPU after its backlog,
    // in a batch with the queries queued for it (one fixed cost for the batch). Comparing these,
    // not bare processing times, is what adapts the split to load: an idle CPU keeps the short
    // queries a lone GPU batch would answer later; a busy one hands them to a batching GPU.
    // A query that finds n others waiting for the GPU rides in their batch: it adds its share and
    // 1/(n+1) of the batch's fixed cost, not a whole batch. Charging it a whole fixed cost kept the
    // GPU's batches small under load (2-3 queries on the default corpus) while the CPU took the
    // rest and ran out of cores first.
    const size_t waiting_for_gpu = std::min(depth(QueueId::kGpu) + depth(QueueId::kFlexible), options_.batch_max - 1);
    const double on_cpu = backlog(Processor::kCpu) + job.cpu_seconds;
    const double on_gpu =
        backlog(Processor::kGpu) + gpu.fixed_cost() / static_cast<double>(waiting_for_gpu + 1) + job.gpu_seconds;
    const double ratio = on_cpu / on_gpu;
    switch (options_.policy) {
      case Policy::kScheduler:
        q = ratio >= options_.prefer_ratio ? QueueId::kGpu : ratio <= 1 / options_.prefer_ratio ? QueueId::kCpu : QueueId::kFlexible;
        break;
      case Policy::kCpuOnly: q = QueueId::kCpu; break;
      case Policy::kGpuOnly: q = QueueId::kGpu; break;
      case Policy::kBestOneAtATime:  // bare processing times: nothing else runs
        q = job.cpu_seconds > gpu.fixed_cost() + job.gpu_seconds ? QueueId::kGpu : QueueId::kCpu;
        break;
    }
  }
  job.queue = q;
  account_queued(job, +1);
  ++counters_.enqueued[static_cast<size_t>(q)];
  queue(q).push_back(job);
  return q;
}

// Only the oldest queries of each queue are looked at (deadlines follow arrivals): the rest are
// seen as they come to the front, so a take stays O(1) however long the queues are.
void ScheduleCore::drop_expired(double now) {
  for (size_t qi = 0; qi < 3; ++qi) {
    auto& jobs = queues_[qi];
    for (auto it = jobs.begin(); it != window_end(jobs);) {
      if (it->deadline >= now) {
        ++it;
        continue;
      }
      account_queued(*it, -1);
      ++counters_.expired;
      expired_.push_back(*it);
      it = jobs.erase(it);
    }
  }
}

std::vector<Job> ScheduleCore::take_expired() { return std::exchange(expired_, {}); }

// Whether `taker` should run a job queued for the other processor: when it would finish it
// before the other processor, busy with its backlog, could start it.
bool ScheduleCore::steal_worthwhile(const Job& job, Processor taker) const {
  if (taker == Processor::kGpu && (!gpu_usable() || job.cpu_only)) return false;
  return predicted(job, taker) < backlog(other(taker));
}

bool ScheduleCore::pick(Processor p, double now, Job& out) {
  const bool scheduler = options_.policy == Policy::kScheduler;
  std::deque<Job>& own = queue(own_queue(p));
  std::deque<Job>& flexible = queue(QueueId::kFlexible);
  const auto remove = [&](std::deque<Job>& from, std::deque<Job>::iterator it) {
    out = *it;
    account_queued(*it, -1);
    from.erase(it);
    return true;
  };
  if (!scheduler) {  // the baselines: first come, first served
    if (own.empty()) return false;
    return remove(own, own.begin());
  }
  // 1. Near the deadline, on its preferred processor (own queue) or any (flexible): earliest first.
  std::deque<Job>* urgent_from = nullptr;
  std::deque<Job>::iterator urgent;
  for (std::deque<Job>* from : {&own, &flexible}) {
    for (auto it = from->begin(); it != window_end(*from); ++it) {
      const double t = predicted(*it, p);
      if (it->deadline - now - t > options_.urgency * t + kMillisecond) continue;
      if (urgent_from == nullptr || it->deadline < urgent->deadline) urgent_from = from, urgent = it;
    }
  }
  if (urgent_from != nullptr) {
    remove(*urgent_from, urgent);
    out.urgent = true;
    ++counters_.urgent[static_cast<size_t>(p)];
    return true;
  }
  // 2. Own queue and flexible queue together, short first with aging: flexible queries compete
  // with the processor's own by the same key. (Taking them only once the own queue was empty
  // starved them under load until their deadline made them urgent: on the default corpus on the
  // H100 the flexible third of the queries waited ~250 ms at 18k q/s while both processors had
  // capacity to spare.)
  std::deque<Job>* best_from = nullptr;
  std::deque<Job>::iterator best;
  double best_key = std::numeric_limits<double>::infinity();
  for (std::deque<Job>* from : {&own, &flexible}) {
    for (auto it = from->begin(); it != window_end(*from); ++it) {
      const double key = it->arrival + options_.aging * predicted(*it, p);
      if (key < best_key) best_key = key, best = it, best_from = from;
    }
  }
  if (best_from != nullptr) return remove(*best_from, best);
  // 3. Steal: the query of the other queue that suits this processor best, if worth it.
  std::deque<Job>& theirs = queue(own_queue(other(p)));
  auto steal = theirs.end();
  double best_ratio = std::numeric_limits<double>::infinity();
  for (auto it = theirs.begin(); it != window_end(theirs); ++it) {
    if (!steal_worthwhile(*it, p)) continue;
    const double ratio = predicted(*it, p) / predicted(*it, other(p));
    if (ratio < best_ratio) best_ratio = ratio, steal = it;
  }
  if (steal == theirs.end()) return false;
  remove(theirs, steal);
  out.stolen = true;
  ++counters_.steals[static_cast<size_t>(p)];
  return true;
}

// More queries of the first one's partition while the batch's predicted time stays under the cap
// (or the first query's own time, if longer) and under every member's remaining time.
void ScheduleCore::fill_batch(Dispatch& run, double now) {
  const CostModel& gpu = model(Processor::kGpu);
  std::vector<QueryFeatures> features{run.jobs[0].features};
  const double cap = std::max(options_.batch_seconds, gpu.predict(features));
  double earliest = run.jobs[0].deadline;
  const auto consider = [&](std::deque<Job>& from, bool stealing) {
    for (auto it = from.begin(); it != from.end() && run.jobs.size() < options_.batch_max && it - from.begin() < kWindow;) {
      if (it->slot != run.jobs[0].slot || (stealing && !steal_worthwhile(*it, Processor::kGpu))) {
        ++it;
        continue;
      }
      features.push_back(it->features);
      const double t = gpu.predict(features);
      if (t > cap || now + t > std::min(earliest, it->deadline)) {
        features.pop_back();
        ++it;
        continue;
      }
      earliest = std::min(earliest, it->deadline);
      account_queued(*it, -1);
      run.jobs.push_back(*it);
      run.jobs.back().stolen = stealing;
      if (stealing) ++counters_.steals[1];
      it = from.erase(it);
    }
  };
  consider(queue(QueueId::kGpu), false);
  if (options_.policy == Policy::kScheduler) {
    consider(queue(QueueId::kFlexible), false);
    consider(queue(QueueId::kCpu), true);
  }
}

Dispatch ScheduleCore::take(Processor p, double now) {
  Dispatch run;
  run.processor = p;
  if (p == Processor::kGpu && !gpu_usable()) return run;
  if (options_.policy == Policy::kBestOneAtATime && runs_in_progress_ > 0) return run;
  clock_ = std::max(clock_, now);
  drop_expired(now);
  Job first;
  if (!pick(p, now, first)) return run;
  run.jobs.push_back(first);
  if (p == Processor::kGpu && options_.policy != Policy::kBestOneAtATime) fill_batch(run, now);
  if (run.jobs.size() > 1) ++counters_.batches, counters_.batched_jobs += run.jobs.size();
  std::vector<QueryFeatures> features;
  for (const Job& job : run.jobs) features.push_back(job.features);
  run.predicted = model(p).predict(features);
  running_seconds_[static_cast<size_t>(p)] += run.predicted;
  ++busy_[static_cast<size_t>(p)];
  ++runs_in_progress_;
  return run;
}

double ScheduleCore::finished(const Dispatch& run, double seconds) {
  running_seconds_[static_cast<size_t>(run.processor)] =
      std::max(0.0, running_seconds_[static_cast<size_t>(run.processor)] - run.predicted);
  if (runs_in_progress_ > 0) --runs_in_progress_;
  if (busy_[static_cast<size_t>(run.processor)] > 0) --busy_[static_cast<size_t>(run.processor)];
  std::vector<QueryFeatures> features;
  for (const Job& job : run.jobs) features.push_back(job.features);
  model(run.processor).observe(features, seconds);
  return run.predicted;
}

void ScheduleCore::gpu_lost() {
  if (gpu_lost_) return;
  gpu_lost_ = true;
  for (QueueId from : {QueueId::kGpu, QueueId::kFlexible}) {
    for (Job& job : queue(from)) {
      account_queued(job, -1);
      job.queue = QueueId::kCpu;
      account_queued(job, +1);
      queue(QueueId::kCpu).push_back(job);
    }
    queue(from).clear();
  }
  queued_seconds_[1] = 0;
  running_seconds_[1] = 0;
  busy_[1] = 0;
}

}  // namespace warp::sched
