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
// Scans of the windows for expired and for urgent queries run at most this often (they ran on
// every take, under the lock, and the lock's hold time is what the CPU threads wait for): a query
// is set aside at most 0.5 ms after its deadline (one that is taken meanwhile is set aside then),
// and an urgent one is noticed within 0.25 ms of becoming urgent, against a slack of 1 ms at least.
constexpr double kExpiryScanEvery = 0.5e-3, kUrgencyScanEvery = 0.25e-3;
// Probes (ScheduleCore::probe): a processor idle for kProbeIdle after its last run while the other
// has queries queued takes one of them, at most one probe in flight and one every kProbeEvery.
// A run (a probe or any other) back in under a quarter of its predicted time shows the model far
// too high: its old observations keep under a 400th of their weight (CostModel::forget: a hundredth
// of the fraction of its prediction the run took), and after such a probe the next follows as soon
// as the processor is idle, so that a model hundreds of times too high is right within a few runs.
constexpr double kProbeIdle = 2e-3, kProbeEvery = 20e-3, kProbeSurprise = 0.25, kSurpriseKeep = 0.01;
// A probe is a query the models say finishes on the prober no later than where it waits (a probe
// at low load that sent a long-list query to an idle CPU, where it took 0.5-0.9 ms against the
// GPU's 0.2, made the scheduler's p99 5-10x the GPU's alone below 1,000 q/s on the H100 host; a
// slack of 0.3 ms still let through, in simulation, a CPU model that had seen only short queries
// for a while and predicted 0.5 ms for a 5 ms one); the cheapest such query by postings. Only a processor that has
// finished no run for kProbeStarved (or never) takes the cheapest query whatever its model says (its model may be far
// too high, and nothing else would show it), and such a blind probe at most once in kBlindProbeEvery queries arrived:
// at most one query in a thousand pays for it, below any p99.
constexpr double kProbeStarved = 0.25;
constexpr uint64_t kBlindProbeEvery = 1000;
// Weight of each take's sample in the average of workers busy with their processor's own work
// (about the last 100 takes: a few ms under load).
constexpr double kOwnBusyWeight = 0.01;
std::deque<Job>::iterator window_end(std::deque<Job>& q) { return q.size() <= kWindow ? q.end() : q.begin() + kWindow; }
Processor other(Processor p) { return p == Processor::kCpu ? Processor::kGpu : Processor::kCpu; }
QueueId own_queue(Processor p) { return p == Processor::kCpu ? QueueId::kCpu : QueueId::kGpu; }
}  // namespace

ScheduleCore::ScheduleCore(CoreOptions options) : options_(options) {
  next_probe_ = {kProbeEvery, kProbeEvery};  // no probe before the models have seen a first load
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
// queue counts by the queries' shares of a batch, plus a batch's fixed cost for every batch_max of
// them: one batch clears many, but not for free. (Without the fixed costs, a model that put most of
// a full batch's time into its fixed part, as full batches alone cannot tell the two apart, saw
// ten batches' worth of queries as a thirtieth of a batch: scheduler_test.)
// While every worker is busy, the age of the oldest query waiting for the processor bounds the
// backlog from below: predictions assume every worker runs flat out, and when a processor drains
// slower than its model says (its threads preempted on a full machine, memory bandwidth shared
// with the other processor), the predicted backlog stays short while its queue grows. On the H100
// host at 51k q/s on the default corpus the CPU's queue waited 19 ms against a predicted backlog
// under 1 ms, and kept half the queries.
double ScheduleCore::backlog(Processor p) const {
  const size_t i = static_cast<size_t>(p);
  double queued = queued_seconds_[i];
  if (p == Processor::kGpu) {
    const size_t waiting = depth(QueueId::kGpu) + depth(QueueId::kFlexible);
    queued += model(p).fixed_cost() * static_cast<double>((waiting + options_.batch_max - 1) / options_.batch_max);
  }
  const double predicted = (running_seconds_[i] + queued) / static_cast<double>(capacity(p));
  if (busy_[i] < capacity(p)) return predicted;  // a worker is free: what waits is about to start
  double waited = 0;
  for (QueueId q : {own_queue(p), QueueId::kFlexible}) {
    const std::deque<Job>& jobs = queues_[static_cast<size_t>(q)];
    if (!jobs.empty()) waited = std::max(waited, clock_ - jobs.front().arrival);
  }
  return std::max(predicted, waited);
}

// From when `job` is near its deadline on `p`: its slack then is urgency × its time + 1 ms.
double ScheduleCore::urgent_from(const Job& job, Processor p) const {
  const double t = predicted(job, p);
  return job.deadline - t - options_.urgency * t - kMillisecond;
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
    // Shares of each processor's capacity: a CPU thread's time over the threads, a stream's time
    // (the query's part of a full batch, fixed cost shared) over the streams.
    const double cpu_share = job.cpu_seconds / static_cast<double>(options_.cpu_workers);
    const double gpu_share = (job.gpu_seconds + gpu.fixed_cost() / static_cast<double>(options_.batch_max)) /
                             static_cast<double>(capacity(Processor::kGpu));
    job.cpu_over_gpu = cpu_share / std::max(gpu_share, 1e-12);
    switch (options_.policy) {
      case Policy::kScheduler:
        if (job.gpu_only) {
          q = QueueId::kGpu;
        } else if (belongs_to_other(job, Processor::kCpu)) {
          q = QueueId::kGpu;
          ++counters_.dominant[1];
        } else if (belongs_to_other(job, Processor::kGpu)) {
          q = QueueId::kCpu;
          ++counters_.dominant[0];
        } else {
          q = ratio >= options_.prefer_ratio       ? QueueId::kGpu
              : ratio <= 1 / options_.prefer_ratio ? QueueId::kCpu
                                                   : QueueId::kFlexible;
        }
        break;
      case Policy::kCpuOnly:
        q = QueueId::kCpu;
        break;
      case Policy::kGpuOnly:
        q = QueueId::kGpu;
        break;
      case Policy::kBestOneAtATime:  // bare processing times: nothing else runs
        q = job.cpu_seconds > gpu.fixed_cost() + job.gpu_seconds ? QueueId::kGpu : QueueId::kCpu;
        break;
    }
  }
  job.queue = q;
  for (Processor p : {Processor::kCpu, Processor::kGpu}) {  // when it may become urgent on p
    if (q == own_queue(other(p))) continue;
    double& next = next_urgency_scan_[static_cast<size_t>(p)];
    next = std::min(next, urgent_from(job, p));
  }
  account_queued(job, +1);
  ++counters_.enqueued[static_cast<size_t>(q)];
  queue(q).push_back(job);
  return q;
}

// Only the oldest queries of each queue are looked at (deadlines follow arrivals): the rest are
// seen as they come to the front, so a take stays O(1) however long the queues are.
void ScheduleCore::drop_expired(double now) {
  if (now < next_expiry_scan_) return;
  next_expiry_scan_ = now + kExpiryScanEvery;
  for (size_t qi = 0; qi < 3; ++qi) {
    auto& jobs = queues_[qi];
    for (auto it = jobs.begin(); it != window_end(jobs);) {
      if (it->deadline >= now) {
        ++it;
        continue;
      }
      account_queued(*it, -1);
      set_aside(*it);
      it = jobs.erase(it);
    }
  }
}

void ScheduleCore::set_aside(const Job& job) {
  ++counters_.expired;
  expired_.push_back(job);
}

std::vector<Job> ScheduleCore::take_expired() { return std::exchange(expired_, {}); }

// Whether `taker` should run a job queued for the other processor: when it would finish it
// before the other processor, busy with its backlog, could start it.
bool ScheduleCore::steal_worthwhile(const Job& job, Processor taker) const {
  if (taker == Processor::kGpu && (!gpu_usable() || job.cpu_only)) return false;
  if (taker == Processor::kCpu && job.gpu_only && gpu_usable()) return false;
  return predicted(job, taker) < backlog(other(taker));
}

bool ScheduleCore::belongs_to_other(const Job& job, Processor p) const {
  if (options_.dominance <= 0) return false;
  return p == Processor::kCpu ? job.cpu_over_gpu >= options_.dominance : job.cpu_over_gpu <= 1 / options_.dominance;
}

bool ScheduleCore::dominant_steal(const Dispatch& run) const {
  return !run.jobs.empty() && run.jobs[0].stolen && belongs_to_other(run.jobs[0], run.processor);
}

// Whether `p` may start one more run of a query that belongs to the other processor: only with
// workers its own work leaves free, keeping a reserve for that work's bursts. Its own work keeps
// m workers busy on average (sampled at its takes), so m + 2√m workers stay for it: on the mixed
// log at its limit about 4 of 13 CPU threads busy with short queries, 8 kept, 5 left for long-list
// queries the GPU has not reached; on long-list queries alone every thread.
bool ScheduleCore::spare_for_dominant_steal(Processor p) const {
  const size_t i = static_cast<size_t>(p);
  const double m = own_busy_average_[i];
  const double reserve = std::ceil(m + 2 * std::sqrt(m));
  return static_cast<double>(busy_dominant_steals_[i]) + reserve < static_cast<double>(capacity(p));
}

bool ScheduleCore::pick(Processor p, double now, Job& out, bool may_steal, double longest) {
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
    if (own.empty() || predicted(own.front(), p) > longest) return false;
    return remove(own, own.begin());
  }
  // 1. Near the deadline, on its preferred processor (own queue) or any (flexible): earliest first.
  // Scanned only once a query may have become urgent (the earliest time seen in the last scan and
  // since, in enqueue) or kUrgencyScanEvery has passed (queries that moved into the window).
  std::deque<Job>* urgent_queue = nullptr;
  std::deque<Job>::iterator urgent;
  double& next_scan = next_urgency_scan_[static_cast<size_t>(p)];
  if (now >= next_scan) {
    next_scan = now + kUrgencyScanEvery;
    for (std::deque<Job>* from : {&own, &flexible}) {
      for (auto it = from->begin(); it != window_end(*from); ++it) {
        const double at = urgent_from(*it, p);
        if (at > now) {
          next_scan = std::min(next_scan, at);
          continue;
        }
        if (urgent_queue == nullptr || it->deadline < urgent->deadline) urgent_queue = from, urgent = it;
      }
    }
  }
  if (urgent_queue != nullptr) {
    next_scan = now;  // more may be urgent
    if (predicted(*urgent, p) > longest) return false;
    remove(*urgent_queue, urgent);
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
  if (best_from != nullptr) return predicted(*best, p) <= longest && remove(*best_from, best);
  if (!may_steal) return false;
  // 3. Steal: the query of the other queue that suits this processor best, if worth it.
  if (!take_from_other(p, /*probing=*/false, out)) return false;
  out.stolen = true;
  ++counters_.steals[static_cast<size_t>(p)];
  return true;
}

bool ScheduleCore::take_from_other(Processor p, bool probing, Job& out) {
  std::deque<Job>& theirs = queue(own_queue(other(p)));
  auto best = theirs.end();
  double best_ratio = std::numeric_limits<double>::infinity();
  const size_t pi = static_cast<size_t>(p);
  const uint64_t arrived = counters_.enqueued[0] + counters_.enqueued[1] + counters_.enqueued[2];
  const bool starved = probing && clock_ - last_finished_[pi] >= kProbeStarved &&
                       arrived - arrived_at_blind_probe_[pi] >= kBlindProbeEvery;
  const double other_backlog = probing && !starved ? backlog(other(p)) : 0;
  for (auto it = theirs.begin(); it != window_end(theirs); ++it) {
    if (probing ? (p == Processor::kCpu ? it->gpu_only : it->cpu_only) ||
                      (!starved && predicted(*it, p) > other_backlog + predicted(*it, other(p)))
                : !steal_worthwhile(*it, p) || (belongs_to_other(*it, p) && !spare_for_dominant_steal(p))) {
      continue;
    }
    // A probe: the fewest postings (the least harm, whatever the models say); a steal: the query
    // that suits the taker best.
    const double ratio =
        probing ? static_cast<double>(it->features.total) : predicted(*it, p) / predicted(*it, other(p));
    if (ratio < best_ratio) best_ratio = ratio, best = it;
  }
  if (best == theirs.end()) return false;
  if (starved) arrived_at_blind_probe_[pi] = arrived;
  out = *best;
  account_queued(*best, -1);
  theirs.erase(best);
  return true;
}

// Without it, a processor whose model predicts far more than its runs take stops receiving queries
// for good: nothing goes to its queue, nothing is worth stealing, and it learns only from the runs it
// makes (the unit tests' simulation: a CPU model 300x too high kept the CPU idle for a whole second
// at 20k q/s). On one H200 start the CPU answered no query at all at the mixed log's refine rates,
// after rates past its capacity, while the GPU's queue waited 26-47 ms; that start's cause was not
// established (tests/bench/results/scheduler.md).
bool ScheduleCore::probe(Processor p, double now, Job& out) {
  const size_t i = static_cast<size_t>(p);
  // Idle: no run of p's in progress, so no probe either.
  if (options_.policy != Policy::kScheduler || busy_[i] > 0 || now < next_probe_[i]) return false;
  if (!take_from_other(p, /*probing=*/true, out)) return false;
  out.stolen = out.probe = true;
  ++counters_.probes[i];
  return true;
}

// More queries of the first one's partition while the batch's predicted time stays under the cap
// (or the first query's own time, if longer) and under every member's remaining time. The
// prediction grows by each member's term (the model is linear), not refitted over the whole batch
// per candidate: this runs under the scheduler's lock.
void ScheduleCore::fill_batch(Dispatch& run, double now) {
  const CostModel& gpu = model(Processor::kGpu);
  double unscaled = gpu.query_term(run.jobs[0].features);
  const double cap = std::max(options_.batch_seconds, gpu.run_time(unscaled));
  double earliest = run.jobs[0].deadline;
  const auto consider = [&](std::deque<Job>& from, bool stealing) {
    for (auto it = from.begin();
         it != from.end() && run.jobs.size() < options_.batch_max && it - from.begin() < kWindow;) {
      if (it->slot != run.jobs[0].slot || (stealing && !steal_worthwhile(*it, Processor::kGpu))) {
        ++it;
        continue;
      }
      const double term = gpu.query_term(it->features);
      const double t = gpu.run_time(unscaled + term);
      if (t > cap || now + t > std::min(earliest, it->deadline)) {
        ++it;
        continue;
      }
      unscaled += term;
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

// The taker's share of the queries waiting for the CPU among the CPU threads free to take them
// (itself included; the busy ones come back later): more of them, in the CPU's own order and never
// stolen, up to cpu_run_max and while the run's predicted time stays under cpu_run_seconds. So a
// thread takes one query while others are idle, and several once every other thread is busy. On
// the H100 host the CPU threads had waited for the scheduler's lock about as long as they searched
// (~110 µs a query at 43k queries/s on the default corpus, 16 threads) and the queue grew while
// half the cores were searching; runs only once more waited than there were threads (the earlier
// rule) still left them waiting 31-44 µs a query on the H200 host near 188k queries/s, the queue
// seldom that deep while the GPU took most of the load.
void ScheduleCore::add_cpu_jobs(Dispatch& run, double now) {
  const size_t waiting = 1 + depth(QueueId::kCpu) + depth(QueueId::kFlexible);  // the run's first too
  const size_t free_threads = options_.cpu_workers - std::min(options_.cpu_workers - 1, busy_[0]);
  const size_t more = std::min(options_.cpu_run_max, (waiting + free_threads - 1) / free_threads) - 1;
  double total = run.jobs[0].cpu_seconds;
  for (size_t i = 0; i < more; ++i) {
    Job next;
    if (!pick(Processor::kCpu, now, next, /*steal=*/false, options_.cpu_run_seconds - total)) break;
    if (next.deadline < now) {
      set_aside(next);
      continue;
    }
    next.cpu_seconds = model(Processor::kCpu).predict(next.features);
    total += next.cpu_seconds;
    run.jobs.push_back(next);
  }
}

Dispatch ScheduleCore::take(Processor p, double now) {
  Dispatch run;
  run.processor = p;
  if (p == Processor::kGpu && !gpu_usable()) return run;
  if (options_.policy == Policy::kBestOneAtATime && runs_in_progress_ > 0) return run;
  clock_ = std::max(clock_, now);
  drop_expired(now);
  if (options_.dominance > 0) {  // workers busy with the processor's own work, on average over its recent takes
    const size_t i = static_cast<size_t>(p);
    const double own = static_cast<double>(busy_[i] - std::min(busy_[i], busy_dominant_steals_[i]));
    own_busy_average_[i] += kOwnBusyWeight * (own - own_busy_average_[i]);
  }
  Job first;
  for (;;) {  // a query past its deadline is set aside, not run (the scan above is not every take)
    if (!pick(p, now, first) && !probe(p, now, first)) return run;
    if (first.deadline >= now) break;
    set_aside(first);
  }
  run.jobs.push_back(first);
  if (p == Processor::kGpu) {
    if (options_.policy != Policy::kBestOneAtATime && !first.probe) fill_batch(run, now);
    if (run.jobs.size() > 1) ++counters_.batches, counters_.batched_jobs += run.jobs.size();
    std::vector<QueryFeatures> features;
    for (const Job& job : run.jobs) features.push_back(job.features);
    run.predicted = model(p).predict(features);
  } else {
    run.jobs[0].cpu_seconds = model(p).predict(first.features);
    if (options_.policy != Policy::kBestOneAtATime && options_.cpu_run_max > 1 && !first.probe) add_cpu_jobs(run, now);
    for (const Job& job : run.jobs) run.predicted += job.cpu_seconds;
  }
  running_seconds_[static_cast<size_t>(p)] += run.predicted;
  ++busy_[static_cast<size_t>(p)];
  if (dominant_steal(run)) ++busy_dominant_steals_[static_cast<size_t>(p)];
  ++runs_in_progress_;
  return run;
}

double ScheduleCore::finished(const Dispatch& run, double seconds, std::span<const double> each,
                              const FoldedObservations* folded) {
  running_seconds_[static_cast<size_t>(run.processor)] =
      std::max(0.0, running_seconds_[static_cast<size_t>(run.processor)] - run.predicted);
  if (runs_in_progress_ > 0) --runs_in_progress_;
  if (busy_[static_cast<size_t>(run.processor)] > 0) --busy_[static_cast<size_t>(run.processor)];
  size_t& dominant_steals = busy_dominant_steals_[static_cast<size_t>(run.processor)];
  if (dominant_steal(run) && dominant_steals > 0) --dominant_steals;
  const size_t i = static_cast<size_t>(run.processor);
  last_finished_[i] = clock_;
  const bool surprised = seconds < kProbeSurprise * run.predicted;
  // A model this far off is relearned from what follows, on any run, not only probes: halving the
  // old observations' weight on probes alone left a model 300 times too high at 2-24 times its
  // true costs in one simulated run of thirty.
  if (surprised) model(run.processor).forget(kSurpriseKeep * seconds / run.predicted);
  if (!run.jobs.empty() && run.jobs[0].probe) {
    next_probe_[i] = clock_ + (surprised ? 0 : kProbeEvery);
  } else {
    next_probe_[i] = std::max(next_probe_[i], clock_ + kProbeIdle);
  }
  if (run.processor == Processor::kCpu) {  // one observation per query
    if (folded != nullptr) {
      model(Processor::kCpu).apply(*folded);
      return run.predicted;
    }
    for (size_t i = 0; i < run.jobs.size(); ++i) {
      const double t = each.size() == run.jobs.size() ? each[i]
                       : run.predicted > 0            ? seconds * run.jobs[i].cpu_seconds / run.predicted
                                                      : seconds / static_cast<double>(run.jobs.size());
      model(Processor::kCpu).observe(run.jobs[i].features, t);
    }
    return run.predicted;
  }
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
  busy_dominant_steals_[1] = 0;
  next_urgency_scan_[0] = -std::numeric_limits<double>::infinity();
}

}  // namespace warp::sched
