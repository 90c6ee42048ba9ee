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
Processor other(Processor p) { return p == Processor::kCpu ? Processor::kGpu : Processor::kCpu; }
QueueId own_queue(Processor p) { return p == Processor::kCpu ? QueueId::kCpu : QueueId::kGpu; }
}  // namespace

ScheduleCore::ScheduleCore(CoreOptions options) : options_(options) {
  options_.cpu_workers = std::max<size_t>(1, options_.cpu_workers);
  options_.batch_max = std::max<size_t>(1, options_.batch_max);
  if (options_.policy == Policy::kGpuOnly && options_.gpu_streams == 0) throw Error("policy gpu needs a GPU");
}

double ScheduleCore::backlog(Processor p) const {
  const size_t i = static_cast<size_t>(p);
  const double capacity = p == Processor::kCpu ? static_cast<double>(options_.cpu_workers)
                                               : static_cast<double>(std::max<size_t>(1, options_.gpu_streams));
  return (queued_seconds_[i] + running_seconds_[i]) / capacity;
}

// Balanced load: 1.5 (and 1/1.5). When the GPU's backlog per stream is b times the CPU's per core,
// the GPU threshold rises by √b (the CPU's falls by √(1/b) in the opposite case): the busier
// processor keeps only the queries it is far better at; the 1 ms floor keeps an idle pair at 1.5.
double ScheduleCore::gpu_threshold() const {
  const double imbalance = (backlog(Processor::kGpu) + kMillisecond) / (backlog(Processor::kCpu) + kMillisecond);
  return options_.prefer_ratio * std::sqrt(std::max(1.0, imbalance));
}

double ScheduleCore::cpu_threshold() const {
  const double imbalance = (backlog(Processor::kGpu) + kMillisecond) / (backlog(Processor::kCpu) + kMillisecond);
  return std::sqrt(std::min(1.0, imbalance)) / options_.prefer_ratio;
}

void ScheduleCore::enqueue(Job job, double now) {
  (void)now;
  job.cpu_seconds = model(Processor::kCpu).predict(job.features);
  QueueId q = QueueId::kCpu;
  if (gpu_usable() && !job.cpu_only) {
    // The GPU's share of the batch the query will likely join: its own cost plus the batch's fixed
    // cost split over the queries waiting for the GPU (at most a full batch).
    const double batch = std::min<double>(static_cast<double>(options_.batch_max),
                                          1.0 + static_cast<double>(depth(QueueId::kGpu)) / static_cast<double>(options_.gpu_streams));
    const CostModel& gpu = model(Processor::kGpu);
    job.gpu_seconds = gpu.predict_marginal(job.features) + gpu.fixed_cost() / batch;
    const double ratio = job.cpu_seconds / job.gpu_seconds;
    switch (options_.policy) {
      case Policy::kScheduler:
        q = ratio >= gpu_threshold() ? QueueId::kGpu : ratio <= cpu_threshold() ? QueueId::kCpu : QueueId::kFlexible;
        break;
      case Policy::kCpuOnly: q = QueueId::kCpu; break;
      case Policy::kGpuOnly: q = QueueId::kGpu; break;
      case Policy::kBestOneAtATime:
        job.gpu_seconds = gpu.predict(job.features);  // alone: no batch shares its fixed cost
        q = job.cpu_seconds > job.gpu_seconds ? QueueId::kGpu : QueueId::kCpu;
        break;
    }
  }
  job.queue = q;
  if (q != QueueId::kFlexible) queued_seconds_[static_cast<size_t>(q)] += q == QueueId::kCpu ? job.cpu_seconds : job.gpu_seconds;
  ++counters_.enqueued[static_cast<size_t>(q)];
  queue(q).push_back(job);
}

void ScheduleCore::drop_expired(double now) {
  for (size_t qi = 0; qi < 3; ++qi) {
    auto& jobs = queues_[qi];
    for (auto it = jobs.begin(); it != jobs.end();) {
      if (it->deadline >= now) {
        ++it;
        continue;
      }
      if (qi < 2) queued_seconds_[qi] -= qi == 0 ? it->cpu_seconds : it->gpu_seconds;
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
  const double mine = taker == Processor::kCpu ? job.cpu_seconds : model(Processor::kGpu).predict(job.features);
  return mine < backlog(other(taker));
}

bool ScheduleCore::pick(Processor p, double now, Job& out) {
  const bool scheduler = options_.policy == Policy::kScheduler;
  std::deque<Job>& own = queue(own_queue(p));
  std::deque<Job>& flexible = queue(QueueId::kFlexible);
  const auto remove = [&](std::deque<Job>& from, std::deque<Job>::iterator it) {
    out = *it;
    if (it->queue != QueueId::kFlexible) {
      queued_seconds_[static_cast<size_t>(it->queue)] -= predicted(*it, it->queue == QueueId::kCpu ? Processor::kCpu : Processor::kGpu);
    }
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
    for (auto it = from->begin(); it != from->end(); ++it) {
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
  // 2. Own queue, short first with aging.
  if (!own.empty()) {
    auto best = own.begin();
    double best_key = std::numeric_limits<double>::infinity();
    for (auto it = own.begin(); it != own.end(); ++it) {
      const double key = it->arrival + options_.aging * predicted(*it, p);
      if (key < best_key) best_key = key, best = it;
    }
    return remove(own, best);
  }
  // 3. The oldest flexible query.
  if (!flexible.empty()) return remove(flexible, flexible.begin());
  // 4. Steal: the query of the other queue that suits this processor best, if worth it.
  std::deque<Job>& theirs = queue(own_queue(other(p)));
  auto best = theirs.end();
  double best_ratio = std::numeric_limits<double>::infinity();
  for (auto it = theirs.begin(); it != theirs.end(); ++it) {
    if (!steal_worthwhile(*it, p)) continue;
    const double ratio = predicted(*it, p) / predicted(*it, other(p));
    if (ratio < best_ratio) best_ratio = ratio, best = it;
  }
  if (best == theirs.end()) return false;
  remove(theirs, best);
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
    for (auto it = from.begin(); it != from.end() && run.jobs.size() < options_.batch_max;) {
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
      if (it->queue == QueueId::kGpu) queued_seconds_[1] -= it->gpu_seconds;
      if (it->queue == QueueId::kCpu) queued_seconds_[0] -= it->cpu_seconds;
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
  ++runs_in_progress_;
  return run;
}

double ScheduleCore::finished(const Dispatch& run, double seconds) {
  running_seconds_[static_cast<size_t>(run.processor)] =
      std::max(0.0, running_seconds_[static_cast<size_t>(run.processor)] - run.predicted);
  if (runs_in_progress_ > 0) --runs_in_progress_;
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
      job.queue = QueueId::kCpu;
      queued_seconds_[0] += job.cpu_seconds;
      queue(QueueId::kCpu).push_back(job);
    }
    queue(from).clear();
  }
  queued_seconds_[1] = 0;
  running_seconds_[1] = 0;
}

}  // namespace warp::sched
