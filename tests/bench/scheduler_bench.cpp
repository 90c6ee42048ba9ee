// The leaf's CPU+GPU scheduler after Ding et al. 2009 Fig. 7: Poisson arrivals at increasing rates,
// mean and p99 delay (arrival to answer) against the arrival rate, for four ways of running one
// leaf's queries: every query on the CPU (all cores), every query on the GPU (batched), each query
// on its better processor one query at a time ("best-serial"), and the scheduler. For each, the
// highest rate sustained with p99 ≤ 50 ms and the highest with no query past its 500 ms deadline.
// Three loads: the GOV2-like preset (long lists), the default corpus (an index directory: short
// lists), and a mixed log (their queries interleaved, half from each, on one leaf holding both).
// Every answer of every policy is the processors' own, so each scheduled answer is also checked
// against the CPU processor's on a sample. Prints markdown tables and writes a CSV for the plot
// (tests/bench/plot_scheduler.py). Needs a GPU. Also: the policies "split" and "splitgpu" (the
// scheduler with the default corpus's searches kept on the CPU, or on the GPU), and
// --cpu-cost-seconds (a load's CPU search time with N threads searching, no scheduler) and
// --cpu-cost-per-query (each query's CPU time, and where a load's time concentrates).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <sys/resource.h>

#include "common/index/index_files.hpp"
#include "common/util/flags.hpp"
#include "common/util/spin_mutex.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/sched/scheduler.hpp"
#include "leaf/sched/scheduler_flags.hpp"
#include "tests/bench/gov2_preset.hpp"

namespace warp {
namespace {

using Clock = std::chrono::steady_clock;
using sched::CoreCounters;
using sched::Policy;

struct Slot {
  const IndexView* view;
  std::unique_ptr<QueryProcessor> cpu, gpu;
};

// A query of a load: one search per partition it goes to (the broker's fan-out, inside one leaf).
struct LoadQuery {
  std::vector<std::pair<size_t, Query>> parts;
};

struct Load {
  std::string name;
  std::vector<LoadQuery> queries;
};

// Queries of 1–4 terms at log-uniform ranks of the partition's lexicon by list length, OR top-10:
// queries no test has seen, mixing frequent and rare terms as the GOV2-like log does.
std::vector<std::vector<std::string>> lexicon_queries(const IndexView& view, size_t count, uint64_t seed) {
  std::vector<std::pair<uint32_t, const std::string*>> terms;
  for (const auto& [term, info] : view.lexicon) terms.push_back({info.words, &term});
  std::sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_rank(0, std::log(static_cast<double>(terms.size())));
  std::vector<std::vector<std::string>> queries(count);
  for (auto& q : queries) {
    const size_t n = 1 + rng() % 4;
    for (size_t i = 0; i < n; ++i)
      q.push_back(*terms[std::min(terms.size() - 1, static_cast<size_t>(std::exp(log_rank(rng))) - 1)].second);
  }
  return queries;
}

// What the machine did to every thread during a window, after jHiccup: a thread that asks to sleep
// 1 ms records how much later it woke (a stall of the process or of the host, not of the
// scheduler), and /proc/stat's steal column says how much of the window the hypervisor gave the
// host's CPUs to someone else. Tells a p99 spike the scheduler caused from one it suffered.
class PlatformProbe {
 public:
  PlatformProbe() : steal_before_(steal_ticks()), thread_([this] { watch(); }) {}
  ~PlatformProbe() {
    if (thread_.joinable()) stop();
  }
  // Stops watching; returns {longest oversleep (s), CPU time stolen by the hypervisor (% of all CPUs)}.
  std::pair<double, double> stop() {
    stopping_ = true;
    thread_.join();
    const auto [steal, total] = steal_ticks();
    const uint64_t d_total = total - steal_before_.second;
    return {longest_,
            d_total ? 100.0 * static_cast<double>(steal - steal_before_.first) / static_cast<double>(d_total) : 0};
  }

 private:
  // {steal, all} ticks of the aggregate "cpu" line.
  static std::pair<uint64_t, uint64_t> steal_ticks() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    uint64_t v[8] = {}, total = 0;
    in >> cpu;
    for (uint64_t& x : v) in >> x, total += x;
    return {v[7], total};
  }
  void watch() {
    while (!stopping_) {
      const Clock::time_point before = Clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      longest_ = std::max(longest_, std::chrono::duration<double>(Clock::now() - before).count() - 1e-3);
    }
  }
  std::pair<uint64_t, uint64_t> steal_before_;
  std::atomic<bool> stopping_{false};
  double longest_ = 0;  // written by the watcher only, read after the join
  std::thread thread_;
};

struct RateResult {
  double rate = 0, mean = 0, p99 = 0;
  size_t queries = 0, missed = 0, gpu_parts = 0, parts = 0;
  double measured[2] = {0, 0}, predicted[2] = {0, 0};  // per processor, over the parts it answered
  size_t batched_parts = 0;
  double batch_sum = 0;
  // Where the time goes: how late the load generator submitted (behind the planned arrival), and
  // per processor the mean wait from submission to the run's start and the mean run time.
  // And the mean time the submit calls of one query take.
  double lag_mean = 0, lag_max = 0, submit_mean = 0;
  double waited[2] = {0, 0}, ran[2] = {0, 0}, longest_run[2] = {0, 0};
  size_t answered[2] = {0, 0};
  // The same by processor for the searches of `long_slot` (the GOV2-like preset's): which
  // processor ran the long-list searches, and what each kind cost it.
  double ran_long[2] = {0, 0};
  size_t answered_long[2] = {0, 0};
  // When (s into the window) the queries at or past the p99 delay arrived: a narrow span is one
  // stall, a wide one a queue that stayed long.
  double worst_from = 0, worst_to = 0;
  // The machine: the longest a sleeping thread overslept (s), the CPU time stolen by the
  // hypervisor (%), and the process's involuntary context switches.
  double hiccup = 0, steal = 0;
  long preempted = 0, faults = 0, compaction_stalls = 0;
  // Seconds each processor's threads waited for the scheduler's lock.
  double lock_wait[2] = {0, 0};
  double lock_turns[2] = {0, 0};
  double driver_busy = 0, gpu_batches = 0;  // the GPU drivers' host work; GPU runs (Σ 1/batch over parts)
  // The scheduler's predicted backlog of each processor, sampled every 2 ms while queries arrive:
  // to set beside the waits measured (a backlog far below them misleads its decisions).
  double backlog_mean[2] = {0, 0};
  // Where a window's p99 is above 20 ms: its worst span in 5 ms bins (stall_timeline).
  std::string stall;
};

// One answered part of a query: which processor ran it, when (s into the window) it was submitted,
// began and ended, and how many queries its run held.
struct PartRecord {
  double submitted = 0, began = 0, ended = 0;
  uint32_t batch = 1;
  int8_t processor = -1;  // -1: not answered
};

// The window's worst span, from 30 ms before its first p99 arrival to 10 ms after its last, in 5 ms
// bins: queries arrived; threads busy on each processor (run time overlapping the bin, a batch's
// shared by its queries, over the bin's length); parts started; and of the parts submitted in the
// bin, the mean wait before their run on each processor. Shows which processor stopped taking work.
std::string stall_timeline(const std::vector<PartRecord>& parts, const std::vector<double>& arrival, double from,
                           double to) {
  constexpr double kBin = 0.005;
  const double begin = std::max(0.0, from - 0.03), end = std::min(to + 0.01, begin + 40 * kBin);
  const size_t bins = static_cast<size_t>((end - begin) / kBin) + 1;
  std::vector<double> busy[2], wait[2];
  std::vector<size_t> arrived(bins), started[2], waited[2];
  for (int p = 0; p < 2; ++p)
    busy[p].assign(bins, 0), wait[p].assign(bins, 0), started[p].assign(bins, 0), waited[p].assign(bins, 0);
  for (double a : arrival) {
    if (a >= begin && a < begin + bins * kBin) ++arrived[static_cast<size_t>((a - begin) / kBin)];
  }
  for (const PartRecord& r : parts) {
    if (r.processor < 0) continue;
    const int p = r.processor;
    for (size_t b = 0; b < bins; ++b) {
      const double lo = begin + b * kBin, hi = lo + kBin;
      busy[p][b] += std::max(0.0, std::min(hi, r.ended) - std::max(lo, r.began)) / kBin / r.batch;
      if (r.began >= lo && r.began < hi) ++started[p][b];
      if (r.submitted >= lo && r.submitted < hi) wait[p][b] += r.began - r.submitted, ++waited[p][b];
    }
  }
  std::string out = "    stall (5 ms bins from " + std::to_string(static_cast<int>(begin * 1e3)) +
                    " ms: arrived | busy cpu/gpu | started cpu/gpu | wait ms cpu/gpu):";
  char cell[128];
  for (size_t b = 0; b < bins; ++b) {
    std::snprintf(cell, sizeof cell, " [%zu | %.1f/%.1f | %zu/%zu | %.1f/%.1f]", arrived[b], busy[0][b], busy[1][b],
                  started[0][b], started[1][b], waited[0][b] ? wait[0][b] / waited[0][b] * 1e3 : 0,
                  waited[1][b] ? wait[1][b] / waited[1][b] * 1e3 : 0);
    out += cell;
  }
  return out;
}

// The process's involuntary context switches and page faults (minor and major), and the host's
// direct-compaction stalls (a page fault waiting for the kernel to assemble a huge page).
struct ProcessCounters {
  long preempted = 0, faults = 0, compaction_stalls = 0;
  static ProcessCounters now() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    ProcessCounters c{usage.ru_nivcsw, usage.ru_minflt + usage.ru_majflt, 0};
    std::ifstream vmstat("/proc/vmstat");
    std::string name;
    for (long value = 0; vmstat >> name >> value;) {
      if (name == "compact_stall") c.compaction_stalls = value;
    }
    return c;
  }
};

RateResult run_rate(sched::Scheduler& scheduler, const std::vector<sched::Target>& targets, const Load& load,
                    double rate, double seconds, uint64_t seed, size_t long_slot, size_t submitters) {
  const size_t count = std::clamp<size_t>(static_cast<size_t>(rate * seconds), 200, 100000);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> arrival(count), finish(count, 0);
  std::vector<std::atomic<int>> remaining(count);
  std::vector<std::atomic<bool>> failed(count);
  const auto query_of = [&](size_t i) -> const LoadQuery& { return load.queries[(seed + i) % load.queries.size()]; };
  // A slot per part of every query, in submission order, each written once by its answer (laid
  // out before the arrivals: the answers write into it from other threads).
  size_t part_count = 0;
  for (size_t i = 0; i < count; ++i) part_count += query_of(i).parts.size();
  std::vector<PartRecord> records(part_count);
  std::atomic<size_t> gpu_parts{0}, parts{0}, done{0};
  // The answers' figures: every processor thread adds to them after each search, and a contended
  // std::mutex would put it to sleep there (spin_mutex.hpp); the leaf's callbacks take no such lock.
  SpinMutex stats_mutex;
  RateResult r;
  double t = 0;
  for (size_t i = 0; i < count; ++i) arrival[i] = (t += gap(rng));
  PlatformProbe probe;
  const ProcessCounters before = ProcessCounters::now();
  const double lock_wait_before[2] = {scheduler.lock_wait_seconds(sched::Processor::kCpu),
                                      scheduler.lock_wait_seconds(sched::Processor::kGpu)};
  const uint64_t lock_turns_before[2] = {scheduler.lock_turns(sched::Processor::kCpu),
                                         scheduler.lock_turns(sched::Processor::kGpu)};
  const double driver_busy_before = scheduler.gpu_driver_busy_seconds();
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(5);
  const auto seconds_since = [&](Clock::time_point when) {
    return std::chrono::duration<double>(when - start).count();
  };
  std::vector<size_t> first_part(count);  // each query's first slot in `records`
  for (size_t i = 0, next_part = 0; i < count; next_part += query_of(i).parts.size(), ++i) first_part[i] = next_part;
  // Submitter s submits arrivals s, s + submitters, ...: one thread's submissions (~4-5 µs a query
  // of two parts on the H200 host) bounded the rates near 220k queries/s, as the leaf's several
  // request threads do not.
  const auto submit_every = [&](size_t first, double& lag_sum, double& lag_max, double& submit_sum) {
    for (size_t i = first; i < count; i += submitters) {
      const LoadQuery& q = query_of(i);
      remaining[i] = static_cast<int>(q.parts.size());
      const Clock::time_point at =
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival[i]));
      if (at > Clock::now() + std::chrono::microseconds(100))
        std::this_thread::sleep_until(at - std::chrono::microseconds(50));
      while (Clock::now() < at) {
      }
      const Clock::time_point submitted = Clock::now();
      const double lag = std::chrono::duration<double>(submitted - at).count();
      lag_sum += lag;
      lag_max = std::max(lag_max, lag);
      size_t next_part = first_part[i];
      for (const auto& [slot, query] : q.parts) {
        scheduler.submit(targets[slot], query, at + std::chrono::milliseconds(500),
                         [&, i, submitted, slot, part = next_part++](sched::Outcome&& outcome) {
                           const Clock::time_point now = Clock::now();
                           const double since_submit = std::chrono::duration<double>(now - submitted).count();
                           if (outcome.error.empty()) {
                             PartRecord& record = records[part];
                             record.submitted = seconds_since(submitted), record.ended = seconds_since(now);
                             record.began = record.ended - outcome.seconds;
                             record.batch = static_cast<uint32_t>(outcome.batch);
                             record.processor = static_cast<int8_t>(outcome.processor);
                           }
                           ++parts;
                           if (!outcome.error.empty()) failed[i] = true;
                           if (outcome.error.empty() && outcome.processor == sched::Processor::kGpu) ++gpu_parts;
                           if (outcome.error.empty()) {  // a batch's times are shared by its queries
                             std::lock_guard<SpinMutex> lock(stats_mutex);
                             const size_t p = static_cast<size_t>(outcome.processor);
                             r.measured[p] += outcome.seconds / static_cast<double>(outcome.batch);
                             r.predicted[p] += outcome.predicted / static_cast<double>(outcome.batch);
                             r.waited[p] += std::max(0.0, since_submit - outcome.seconds);
                             r.ran[p] += outcome.seconds;
                             r.longest_run[p] = std::max(r.longest_run[p], outcome.seconds);
                             ++r.answered[p];
                             if (slot == long_slot) r.ran_long[p] += outcome.seconds, ++r.answered_long[p];
                             if (outcome.processor == sched::Processor::kGpu) {
                               r.batch_sum += static_cast<double>(outcome.batch), ++r.batched_parts;
                               r.gpu_batches += 1.0 / static_cast<double>(outcome.batch);
                             }
                           }
                           if (--remaining[i] == 0) {
                             finish[i] = seconds_since(Clock::now());
                             ++done;
                           }
                         });
      }
      submit_sum += std::chrono::duration<double>(Clock::now() - submitted).count();
    }
  };
  std::vector<std::array<double, 3>> submitted_figures(submitters);  // lag sum, lag max, submit sum
  std::atomic<bool> submitting_done{false};
  std::thread backlog_sampler([&] {
    double sums[2] = {0, 0};
    size_t samples = 0;
    while (!submitting_done.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      sums[0] += scheduler.backlog_seconds(sched::Processor::kCpu);
      sums[1] += scheduler.gpu_usable() ? scheduler.backlog_seconds(sched::Processor::kGpu) : 0;
      ++samples;
    }
    for (size_t p = 0; p < 2; ++p) r.backlog_mean[p] = samples ? sums[p] / static_cast<double>(samples) : 0;
  });
  std::vector<std::thread> submitting;
  for (size_t s = 1; s < submitters; ++s) {
    submitting.emplace_back(
        [&, s] { submit_every(s, submitted_figures[s][0], submitted_figures[s][1], submitted_figures[s][2]); });
  }
  submit_every(0, submitted_figures[0][0], submitted_figures[0][1], submitted_figures[0][2]);
  for (auto& thread : submitting) thread.join();
  submitting_done = true;
  backlog_sampler.join();
  for (const auto& [lag_sum, lag_max, submit_sum] : submitted_figures) {
    r.lag_mean += lag_sum / static_cast<double>(count);
    r.lag_max = std::max(r.lag_max, lag_max);
    r.submit_mean += submit_sum / static_cast<double>(count);
  }
  while (done < count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::tie(r.hiccup, r.steal) = probe.stop();
  const ProcessCounters after = ProcessCounters::now();
  r.preempted = after.preempted - before.preempted;
  r.faults = after.faults - before.faults;
  r.compaction_stalls = after.compaction_stalls - before.compaction_stalls;
  for (sched::Processor p : {sched::Processor::kCpu, sched::Processor::kGpu}) {
    r.lock_wait[static_cast<size_t>(p)] = scheduler.lock_wait_seconds(p) - lock_wait_before[static_cast<size_t>(p)];
    r.lock_turns[static_cast<size_t>(p)] =
        static_cast<double>(scheduler.lock_turns(p) - lock_turns_before[static_cast<size_t>(p)]);
  }
  r.driver_busy = scheduler.gpu_driver_busy_seconds() - driver_busy_before;
  r.rate = rate;
  r.queries = count;
  std::vector<double> delays(count);
  for (size_t i = 0; i < count; ++i) {
    delays[i] = finish[i] - arrival[i];
    r.mean += delays[i] / static_cast<double>(count);
    if (delays[i] > 0.5 || failed[i]) ++r.missed;  // late, or expired before it started
  }
  std::vector<double> sorted = delays;
  std::sort(sorted.begin(), sorted.end());
  r.p99 = sorted[std::min(count - 1, count * 99 / 100)];
  r.worst_from = 1e9;
  for (size_t i = 0; i < count; ++i) {
    if (delays[i] >= r.p99)
      r.worst_from = std::min(r.worst_from, arrival[i]), r.worst_to = std::max(r.worst_to, arrival[i]);
  }
  r.gpu_parts = gpu_parts;
  r.parts = parts;
  if (r.p99 > 0.02) r.stall = stall_timeline(records, arrival, r.worst_from, r.worst_to);
  return r;
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kCpuOnly:
      return "cpu";
    case Policy::kGpuOnly:
      return "gpu";
    case Policy::kBestOneAtATime:
      return "best-serial";
    case Policy::kScheduler:
      return "scheduler";
  }
  return "?";
}

// The highest rate of a ladder whose p99 stayed within 50 ms (0: none).
double highest_within_50ms(const std::map<double, double>& p99_by_rate) {
  double best = 0;
  for (const auto& [rate, p99] : p99_by_rate) {
    if (p99 <= 0.05) best = rate;
  }
  return best;
}

// The targets for one load, when the CPU, GPU and scheduler policies all ran: the
// scheduler's highest rate against the better single processor's, and at the highest ladder rate
// not above half of that, the scheduler's p99 against the CPU alone's (a rate the CPU alone never
// reached counts as past 500 ms).
void print_targets(const std::string& load, const std::map<std::string, std::map<double, double>>& p99_at) {
  for (const char* p : {"cpu", "gpu", "scheduler"}) {
    if (!p99_at.count(p)) return;
  }
  const double best = std::max(highest_within_50ms(p99_at.at("cpu")), highest_within_50ms(p99_at.at("gpu")));
  const double scheduler = highest_within_50ms(p99_at.at("scheduler"));
  const auto& cpu = p99_at.at("cpu");
  double half = 0, scheduler_p99 = 0;
  for (const auto& [rate, p99] : p99_at.at("scheduler")) {
    // A rate both measured (refined rates are a policy's own), or one the CPU's ladder never reached.
    const bool comparable = cpu.count(rate) || cpu.empty() || rate > cpu.rbegin()->first;
    if (rate <= best / 2 * 1.0001 && comparable) half = rate, scheduler_p99 = p99;
  }
  const double cpu_p99 = cpu.count(half) ? cpu.at(half) : 0.5;
  std::printf(
      "\nTargets (%s): scheduler %.0f q/s = %.2fx the better single processor (%.0f q/s); at %.0f q/s (half of it or "
      "below) p99 %.2f ms against the CPU alone's %s%.2f ms (%.1fx lower)\n",
      load.c_str(), scheduler, best > 0 ? scheduler / best : 0, best, half, scheduler_p99 * 1e3,
      cpu.count(half) ? "" : "> ", cpu_p99 * 1e3, scheduler_p99 > 0 ? cpu_p99 / scheduler_p99 : 0);
}

// Dominance, rate by rate: the scheduler's p99 and mean against the better single processor's at
// that rate (within 10% or 0.3 ms, whichever is larger, counts as no worse; a rate a processor's
// ladder never reached counts as past 500 ms for it). `delays`: policy → rate → (p99, mean).
using Delays = std::map<std::string, std::map<double, std::pair<double, double>>>;
void print_dominance(const std::string& load, const Delays& delays) {
  for (const char* p : {"cpu", "gpu", "scheduler"}) {
    if (!delays.count(p)) return;
  }
  const auto at = [&](const char* policy, double rate) {
    const auto& of = delays.at(policy);
    return of.count(rate) ? of.at(rate) : std::pair<double, double>{0.5, 0.5};
  };
  const auto no_worse = [](double mine, double best) { return mine <= std::max(1.1 * best, best + 0.3e-3); };
  std::printf(
      "\nDominance (%s): p99 / mean ms at each rate the scheduler ran\n\n| q/s | CPU alone | GPU alone | scheduler | "
      "no worse than the better |\n|---:|---|---|---|---|\n",
      load.c_str());
  size_t dominated = 0, rates = 0;
  for (const auto& [rate, mine] : delays.at("scheduler")) {
    const auto cpu = at("cpu", rate), gpu = at("gpu", rate);
    const double best_p99 = std::min(cpu.first, gpu.first), best_mean = std::min(cpu.second, gpu.second);
    const bool ok = no_worse(mine.first, best_p99) && no_worse(mine.second, best_mean);
    dominated += ok, ++rates;
    std::printf("| %.0f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %s |\n", rate, cpu.first * 1e3, cpu.second * 1e3,
                gpu.first * 1e3, gpu.second * 1e3, mine.first * 1e3, mine.second * 1e3, ok ? "yes" : "**no**");
  }
  std::printf("\nThe scheduler is no worse than the better single processor at %zu of %zu rates.\n", dominated, rates);
}

// Each query of each load searched on the CPU processor alone, one thread, warm (the best of three
// runs), into a CSV: its terms' document frequencies, its time and what it decoded. On stdout, where
// a load's CPU time concentrates: the costliest queries' share, and the mean by number of terms
// (what a faster CPU search for the scheduler's long-list queries has to take on).
void cpu_cost_per_query(const std::vector<Load>& loads, const std::vector<Slot>& slots, const std::string& path) {
  std::ofstream csv(path);
  if (!csv) throw Error("cannot write " + path);
  csv << "load,query,part,terms,dfs,postings,us,blocks_decoded,blocks_total,postings_decoded,text\n";
  for (const Load& load : loads) {
    std::vector<double> costs;                             // per query, its parts summed
    std::map<size_t, std::pair<size_t, double>> by_terms;  // terms → queries, µs
    for (size_t i = 0; i < load.queries.size(); ++i) {
      double query_us = 0;
      size_t terms = 0;
      for (size_t part = 0; part < load.queries[i].parts.size(); ++part) {
        const auto& [slot, query] = load.queries[i].parts[part];
        double best = 1e300;
        QueryResult result;
        for (int run = 0; run < 3; ++run) {
          const auto start = Clock::now();
          result = slots[slot].cpu->search(query);
          best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
        std::string dfs;
        uint64_t postings = 0;
        for (const std::string& term : query.terms) {
          const TermInfo* info = slots[slot].view->find(term);
          const uint32_t df = info != nullptr ? info->df : 0;
          dfs += (dfs.empty() ? "" : " ") + std::to_string(df);
          postings += df;
        }
        csv << load.name << ',' << i << ',' << part << ',' << query.terms.size() << ',' << dfs << ',' << postings << ','
            << best << ',' << result.stats.blocks_decoded << ',' << result.stats.blocks_total << ','
            << result.stats.postings_decoded << ',';
        csv << '"';  // the terms quoted as CSV quotes a field (a term may hold a comma or a quote)
        for (size_t t = 0; t < query.terms.size(); ++t) {
          if (t > 0) csv << ' ';
          for (const char c : query.terms[t]) csv << (c == '"' ? "\"\"" : std::string_view(&c, 1));
        }
        csv << "\"\n";
        query_us += best;
        terms = std::max(terms, query.terms.size());
      }
      costs.push_back(query_us);
      by_terms[terms].first += 1, by_terms[terms].second += query_us;
    }
    double total = 0;
    for (double c : costs) total += c;
    std::sort(costs.begin(), costs.end(), std::greater<>());
    std::printf("%s: %zu queries, %.1f µs a query on one thread (warm, best of 3)", load.name.c_str(), costs.size(),
                total / static_cast<double>(costs.size()));
    for (const double top : {0.01, 0.1, 0.5}) {
      const size_t n = std::max<size_t>(1, static_cast<size_t>(top * static_cast<double>(costs.size())));
      double sum = 0;
      for (size_t k = 0; k < n && k < costs.size(); ++k) sum += costs[k];
      std::printf("; costliest %.0f%%: %.0f%% of the time", top * 100, 100 * sum / total);
    }
    std::printf("\n");
    for (const auto& [terms, entry] : by_terms) {
      std::printf("  %zu term(s): %zu queries, %.1f µs each, %.0f%% of the time\n", terms, entry.first,
                  entry.second / static_cast<double>(entry.first), 100 * entry.second / total);
    }
  }
}

int run(int argc, char** argv) {
  Flags flags("usage: scheduler_bench --index DIR [--gov2-docs N] [--loads gov2,default,mixed] [--out FILE.csv]");
  flags.value("index", "", "the default corpus's index directory (its partitions)")
      .value("gov2-docs", "25205179", "documents of the GOV2-like preset")
      .value("queries", "1000", "queries per load")
      .value("k", "10", "the OR queries' top-k")
      .value("loads", "gov2,default,mixed", "loads to run")
      .value("policies", "cpu,gpu,best-serial,scheduler",
             "policies to run; also split: the scheduler with the default corpus's searches kept on the CPU (the "
             "GOV2-like ones go by its rules); splitgpu: the default corpus's searches kept on the GPU (the split the "
             "mixed log's bound assumed: the CPU's threads left to the long-list searches)")
      .value("seconds", "1.5", "seconds of arrivals per rate")
      .value("repeat", "1",
             "windows per rate; the one with the median p99 counts (3: a lone hiccup no longer decides a rate)")
      .value("start-rate", "50", "first arrival rate, queries/s")
      .value("stop-past-50ms", "0",
             "end a ladder after this many rates in a row over 50 ms p99 (0: at 500 ms or 5% missed; windows hold "
             "100,000 queries at most, so past ~100k queries/s the backlog never reaches 500 ms)")
      .value("submitters", "2",
             "threads submitting the arrivals (the leaf's request threads; one alone bounded the rates near 220k "
             "queries/s)")
      .value("step", "1.4", "rate factor from one step to the next")
      .value("refine", "0", "bisections between the last rate within 50 ms p99 and the next")
      .value("cpu-threads", "0",
             "CPU threads (0: every core for the CPU-only policy, the leaf's default for the others)")
      .value("gpu-streams", "8",
             "GPU streams (the leaf's --gpu-batch-streams under the scheduler; 8, its default there)")
      .value("gpu-threads", "0",
             "host threads driving the GPU streams (the leaf's --scheduler-gpu-threads; 0: one per stream, at most 4)")
      .value("batch-max", "16", "queries per GPU batch at most")
      .value("cpu-run-max", "8", "queries a CPU thread takes at once at most (the leaf's --scheduler-cpu-run-max)")
      .value("dominance", "4",
             "queries this many times cheaper in capacity on one processor join its queue (the leaf's "
             "--scheduler-dominance; 0: off)")
      .value("gpu-devices", "0", "CUDA devices (the leaf's --gpu-devices): partitions spread over them")
      .value("gpu-replicas", "1", "devices per partition (the leaf's --gpu-replicas)")
      .value("gpu-wait", "spin",
             "how a host thread waits for a stream where it does (the leaf's --gpu-wait: spin, yield, block; the "
             "scheduler's drivers poll)")
      .value("calibration-ms", "1500", "calibration per processor and partition")
      .value("term-tops", "1",
             "0: the CPU's OR without the floor of its terms' best postings and rank floors (or_floor), to measure it")
      .value("out", "scheduler_bench.csv", "CSV of every rate's figures")
      .value("cpu-cost-seconds", "0",
             "> 0: instead of the ladders, each load's searches on the CPU processor for this long by each of "
             "--cpu-cost-threads' thread counts, and the mean time of a search per thread (what a CPU thread's "
             "capacity for the load is made of; with --policies cpu, no GPU needed)")
      .value("cpu-cost-threads", "1",
             "--cpu-cost-seconds: threads searching at once, e.g. 1,12,16 (each count in turn)")
      .value("cpu-cost-per-query", "",
             "a CSV file: instead of the ladders, every query of each load on the CPU processor alone (one thread, "
             "warm, best of 3), with its terms' document frequencies and what it decoded; where the time concentrates "
             "on stdout (with --policies cpu, no GPU needed)");
  flags.parse(argc, argv);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  gpu::GpuSettings gpu_settings;
  gpu_settings.scheduled = true;
  gpu_settings.batch_streams = flags.count("gpu-streams");
  gpu_settings.batch_max_queries = flags.count("batch-max");
  gpu_settings.devices = gpu::parse_gpu_devices(flags.get("gpu-devices"));
  gpu_settings.replicas = std::max<size_t>(1, flags.count("gpu-replicas"));
  gpu_settings.wait = gpu::parse_gpu_wait(flags.get("gpu-wait"));
  std::string why;
  const bool have_gpu = gpu::gpu_available(&why);
  if (!have_gpu && flags.get("policies") != "cpu")
    throw Error("scheduler_bench needs a GPU (or --policies cpu): " + why);
  std::printf("GPU: %s; %u CPU threads\n", have_gpu ? gpu::gpu_description().c_str() : "none",
              std::thread::hardware_concurrency());
  const auto gpu_processor = [&](const IndexView& view) -> std::unique_ptr<QueryProcessor> {
    return have_gpu ? gpu::make_gpu_processor(view, gpu_settings) : nullptr;
  };

  CpuProcessorOptions cpu_options;
  cpu_options.term_tops_floor = flags.get("term-tops") != "0";
  std::vector<Slot> slots;
  std::vector<size_t> default_slots;
  size_t gov2_slot = SIZE_MAX;
  std::vector<std::unique_ptr<Partition>> partitions;
  std::unique_ptr<synthetic::Gov2Collection> gov2;
  const std::string loads_wanted = flags.get("loads");
  const size_t query_count = flags.count("queries");
  const size_t top_k = flags.count("k");
  if (!flags.get("index").empty()) {
    partitions = open_index(flags.get("index"), {});
    for (auto& p : partitions) {
      default_slots.push_back(slots.size());
      slots.push_back(
          {&p->view(), std::make_unique<CpuQueryProcessor>(p->view(), cpu_options), gpu_processor(p->view())});
    }
    std::printf("default corpus: %zu partitions, %u documents\n", partitions.size(),
                partitions.back()->view().meta.doc_end - partitions.front()->view().meta.doc_begin);
  }
  if (loads_wanted.find("gov2") != std::string::npos || loads_wanted.find("mixed") != std::string::npos) {
    synthetic::Gov2Params params;
    params.documents = static_cast<uint32_t>(flags.count("gov2-docs"));
    params.queries = static_cast<uint32_t>(query_count);
    const auto start = Clock::now();
    gov2 = std::make_unique<synthetic::Gov2Collection>(synthetic::make_gov2_like(params));
    gov2_slot = slots.size();
    slots.push_back(
        {&gov2->view, std::make_unique<CpuQueryProcessor>(gov2->view, cpu_options), gpu_processor(gov2->view)});
    std::printf("GOV2-like preset: %u documents, %.2f million postings per query, generated in %.0f s\n",
                params.documents, gov2->postings_per_query / 1e6,
                std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::vector<Load> loads;
  std::stringstream load_names(loads_wanted);
  for (std::string name; std::getline(load_names, name, ',');) {
    Load load{name, {}};
    if (name == "gov2" || name == "mixed") {
      if (gov2_slot == SIZE_MAX) throw Error("load " + name + " needs the GOV2-like preset");
      for (const auto& terms : gov2->queries)
        load.queries.push_back({{{gov2_slot, Query(terms, QueryMode::kOr, top_k)}}});
    }
    if (name == "default" || name == "mixed") {
      if (default_slots.empty()) throw Error("load " + name + " needs --index");
      const auto raw = lexicon_queries(*slots[default_slots[0]].view, query_count, 2026);
      std::vector<LoadQuery> queries;
      for (const auto& terms : raw) {
        LoadQuery q;
        for (size_t slot : default_slots) q.parts.push_back({slot, Query(terms, QueryMode::kOr, top_k)});
        queries.push_back(std::move(q));
      }
      if (name == "default") {
        load.queries = std::move(queries);
      } else {  // interleaved: half from each
        std::vector<LoadQuery> mixed;
        for (size_t i = 0; i < query_count; ++i) mixed.push_back(i % 2 == 0 ? load.queries[i / 2] : queries[i / 2]);
        load.queries = std::move(mixed);
      }
    }
    if (load.queries.empty()) throw Error("unknown load '" + name + "'");
    loads.push_back(std::move(load));
  }

  if (!flags.get("cpu-cost-per-query").empty()) {
    cpu_cost_per_query(loads, slots, flags.get("cpu-cost-per-query"));
    return 0;
  }
  if (const double seconds = flags.number("cpu-cost-seconds"); seconds > 0) {
    std::vector<size_t> counts;  // threads searching at once
    std::stringstream list(flags.get("cpu-cost-threads"));
    for (std::string n; std::getline(list, n, ',');) counts.push_back(std::max<size_t>(1, std::stoul(n)));
    for (const Load& load : loads) {
      for (size_t threads : counts) {
        std::atomic<size_t> searches{0};
        const auto start = Clock::now();
        std::vector<std::thread> pool;
        for (size_t t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            size_t mine = 0;
            // Each thread from its own place in the load; the clock read every 32 queries (a
            // query's parts, one or two searches, must not step over the check).
            for (size_t i = t * 97;; ++i) {
              const LoadQuery& q = load.queries[i % load.queries.size()];
              for (const auto& [slot, query] : q.parts) slots[slot].cpu->search(query), ++mine;
              if (i % 32 == 0 && std::chrono::duration<double>(Clock::now() - start).count() >= seconds) break;
            }
            searches += mine;
          });
        }
        for (std::thread& t : pool) t.join();
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        std::printf("%s, %zu thread(s): %.0f searches/s, %.1f µs a search per thread\n", load.name.c_str(), threads,
                    static_cast<double>(searches) / elapsed,
                    elapsed * static_cast<double>(threads) / static_cast<double>(searches) * 1e6);
      }
    }
    return 0;
  }
  std::ofstream csv(flags.get("out"));
  csv << "load,policy,rate,mean_ms,p99_ms,missed,queries,gpu_share,hiccup_ms,steal_pct\n";
  std::vector<Policy> policies;
  std::stringstream policy_names(flags.get("policies"));
  // Per policy, where the scheduler's default-corpus searches are pinned: "split" on the CPU alone,
  // "splitgpu" on the GPU alone (the GOV2-like ones by its rules); empty for the other policies.
  std::vector<std::string> pinned_to;
  for (std::string name; std::getline(policy_names, name, ',');) {
    const bool split = name == "split" || name == "splitgpu";
    pinned_to.push_back(split ? name : "");
    policies.push_back(split ? Policy::kScheduler : sched::parse_policy(name));
  }
  const double seconds = flags.number("seconds");
  const size_t repeat = std::max<size_t>(1, flags.count("repeat"));
  const size_t submitters = std::max<size_t>(1, flags.count("submitters"));
  const size_t stop_past = flags.count("stop-past-50ms");
  for (const Load& load : loads) {
    std::map<std::string, std::map<double, double>> p99_at;  // policy's name → rate → p99 (s)
    Delays delays;                                           // policy's name → rate → (p99, mean) (s)
    // The load's first short-list and first long-list search: each rate reports the models'
    // predictions for them (the scheduler's decisions follow them; a model far from the measured
    // times shows there).
    std::vector<std::pair<const char*, sched::QueryFeatures>> reference_searches;
    for (const bool long_list : {false, true}) {
      for (const LoadQuery& q : load.queries) {
        const auto it = std::find_if(q.parts.begin(), q.parts.end(),
                                     [&](const auto& part) { return (part.first == gov2_slot) == long_list; });
        if (it == q.parts.end()) continue;
        reference_searches.emplace_back(long_list ? "long" : "short",
                                        sched::features_of(it->second, *slots[it->first].view));
        break;
      }
    }
    std::printf("\n### Load: %s (%zu queries, OR top-%zu)\n\n", load.name.c_str(), load.queries.size(), top_k);
    std::printf(
        "| policy | highest rate, p99 ≤ 50 ms (q/s) | highest rate, none past 500 ms (q/s) | p99 at the rates below "
        "(ms) |\n|---|---:|---:|---|\n");
    for (size_t pi = 0; pi < policies.size(); ++pi) {
      const Policy policy = policies[pi];
      const std::string name = pinned_to[pi].empty() ? policy_name(policy) : pinned_to[pi];
      sched::SchedulerOptions options;
      const size_t threads = flags.count("cpu-threads");
      options.core.gpu_streams = have_gpu ? flags.count("gpu-streams") * gpu_settings.devices.size() : 0;  // per device
      options.gpu_threads = sched::gpu_driver_threads(options.core.gpu_streams, flags.count("gpu-threads"));
      // The CPU alone gets every core; with the GPU, the leaf's default (cores for its streams).
      options.core.cpu_workers = threads > 0                  ? threads
                                 : policy == Policy::kCpuOnly ? std::thread::hardware_concurrency()
                                                              : sched::default_cpu_workers(options.gpu_threads);
      options.core.batch_max = flags.count("batch-max");
      options.core.cpu_run_max = std::max<size_t>(1, flags.count("cpu-run-max"));
      options.core.dominance = std::max(0.0, flags.number("dominance"));
      options.core.policy = policy;
      options.calibration_seconds = flags.number("calibration-ms") / 1e3;
      sched::Scheduler scheduler(options);
      std::vector<sched::Target> targets;
      for (size_t slot = 0; slot < slots.size(); ++slot) {
        const bool default_corpus = slot != gov2_slot;
        const bool cpu_only = default_corpus && pinned_to[pi] == "split";
        targets.push_back(
            {slots[slot].view, slots[slot].cpu.get(), cpu_only ? nullptr : slots[slot].gpu.get(), nullptr});
        targets.back().gpu_only = default_corpus && pinned_to[pi] == "splitgpu";
      }
      std::vector<size_t> used;
      for (const LoadQuery& q : load.queries) {
        for (const auto& part : q.parts) used.push_back(part.first);
      }
      std::sort(used.begin(), used.end());
      used.erase(std::unique(used.begin(), used.end()), used.end());
      for (size_t slot : used) scheduler.calibrate(targets[slot]);
      // Answers checked against the CPU processor's on a sample, whichever processor answered.
      for (size_t i = 0; i < std::min<size_t>(50, load.queries.size()); ++i) {
        for (const auto& [slot, query] : load.queries[i].parts) {
          const sched::Outcome outcome = scheduler.search(targets[slot], query);
          const QueryResult expected = slots[slot].cpu->search(query);
          bool same = outcome.result.hits.size() == expected.hits.size();
          for (size_t h = 0; same && h < expected.hits.size(); ++h) {
            same = outcome.result.hits[h].doc == expected.hits[h].doc &&
                   outcome.result.hits[h].score == expected.hits[h].score;
          }
          if (!same) throw Error("answers differ from the CPU processor's: policy " + name);
        }
      }
      double best_deadline = 0;
      std::string p99s;
      // One rate: `repeat` windows, the median p99's window counts; reported on stderr and in the CSV.
      const auto measure = [&](double rate, int step) {
        std::vector<RateResult> windows;
        for (size_t w = 0; w < repeat; ++w)
          windows.push_back(
              run_rate(scheduler, targets, load, rate, seconds, 7 + step * repeat + w, gov2_slot, submitters));
        std::string machine;  // every window's p99 beside the machine's stalls in it
        for (const RateResult& w : windows) {
          char cell[256];
          std::snprintf(cell, sizeof cell,
                        " [p99 %.1f ms, worst arrived %.2f-%.2f s, longest run cpu %.1f gpu %.1f ms, hiccup %.1f ms, "
                        "steal %.1f%%, "
                        "preempted %ld, faults %ld, compaction stalls %ld]",
                        w.p99 * 1e3, w.worst_from, w.worst_to, w.longest_run[0] * 1e3, w.longest_run[1] * 1e3,
                        w.hiccup * 1e3, w.steal, w.preempted, w.faults, w.compaction_stalls);
          machine += cell;
        }
        std::sort(windows.begin(), windows.end(),
                  [](const RateResult& a, const RateResult& b) { return a.p99 < b.p99; });
        const RateResult r = windows[windows.size() / 2];
        p99_at[name][rate] = r.p99;
        delays[name][rate] = {r.p99, r.mean};
        csv << load.name << ',' << name << ',' << r.rate << ',' << r.mean * 1e3 << ',' << r.p99 * 1e3 << ',' << r.missed
            << ',' << r.queries << ',' << (r.parts ? double(r.gpu_parts) / r.parts : 0) << ',' << r.hiccup * 1e3 << ','
            << r.steal << '\n';
        csv.flush();
        char cell[64];
        std::snprintf(cell, sizeof cell, "%s%.0f@%.1f", p99s.empty() ? "" : " ", rate, r.p99 * 1e3);
        p99s += cell;
        if (r.missed == 0) best_deadline = std::max(best_deadline, rate);
        const CoreCounters c = scheduler.counters();
        std::string models;  // the models' predictions for the reference searches
        for (const auto& [kind, f] : reference_searches) {
          char cell[128];
          std::snprintf(cell, sizeof cell, "%s%s cpu %.3f gpu %.3f ms", models.empty() ? "" : ", ", kind,
                        scheduler.predicted_seconds(sched::Processor::kCpu, f) * 1e3,
                        have_gpu ? scheduler.predicted_seconds(sched::Processor::kGpu, f) * 1e3 : 0.0);
          models += cell;
        }
        std::fprintf(
            stderr,
            "%s %s %.0f q/s: mean %.2f ms p99 %.2f ms missed %zu gpu %.0f%% | measured/predicted cpu %.2f gpu %.2f, "
            "gpu batch %.1f | lag mean %.2f max %.2f ms, submit %.1f µs; cpu wait %.2f run %.2f ms, gpu wait %.2f run "
            "%.2f ms (backlog predicted cpu %.2f gpu %.2f ms); long-list searches cpu %zu (%.2f ms) gpu %zu, "
            "short-list cpu %zu (%.3f ms) gpu %zu | lock wait a query cpu %.1f gpu %.1f µs (turns a query cpu %.2f gpu "
            "%.2f), gpu driver host work %.1f µs a run | so far: queued cpu %llu gpu %llu flexible %llu, steals cpu "
            "%llu gpu %llu, urgent %llu, by advantage cpu %llu gpu %llu, probes cpu %llu gpu %llu | predicted alone: "
            "%s | machine:%s\n",
            load.name.c_str(), name.c_str(), rate, r.mean * 1e3, r.p99 * 1e3, r.missed,
            r.parts ? 100.0 * r.gpu_parts / r.parts : 0, r.predicted[0] > 0 ? r.measured[0] / r.predicted[0] : 0,
            r.predicted[1] > 0 ? r.measured[1] / r.predicted[1] : 0,
            r.batched_parts ? r.batch_sum / r.batched_parts : 0, r.lag_mean * 1e3, r.lag_max * 1e3, r.submit_mean * 1e6,
            r.answered[0] ? r.waited[0] / r.answered[0] * 1e3 : 0, r.answered[0] ? r.ran[0] / r.answered[0] * 1e3 : 0,
            r.answered[1] ? r.waited[1] / r.answered[1] * 1e3 : 0, r.answered[1] ? r.ran[1] / r.answered[1] * 1e3 : 0,
            r.backlog_mean[0] * 1e3, r.backlog_mean[1] * 1e3, r.answered_long[0],
            r.answered_long[0] ? r.ran_long[0] / r.answered_long[0] * 1e3 : 0, r.answered_long[1],
            r.answered[0] - r.answered_long[0],
            r.answered[0] > r.answered_long[0] ? (r.ran[0] - r.ran_long[0]) / (r.answered[0] - r.answered_long[0]) * 1e3
                                               : 0,
            r.answered[1] - r.answered_long[1], r.answered[0] ? r.lock_wait[0] / r.answered[0] * 1e6 : 0,
            r.answered[1] ? r.lock_wait[1] / r.answered[1] * 1e6 : 0,
            r.answered[0] ? r.lock_turns[0] / r.answered[0] : 0, r.answered[1] ? r.lock_turns[1] / r.answered[1] : 0,
            r.gpu_batches > 0 ? r.driver_busy / r.gpu_batches * 1e6 : 0, (unsigned long long)c.enqueued[0],
            (unsigned long long)c.enqueued[1], (unsigned long long)c.enqueued[2], (unsigned long long)c.steals[0],
            (unsigned long long)c.steals[1], (unsigned long long)(c.urgent[0] + c.urgent[1]),
            (unsigned long long)c.dominant[0], (unsigned long long)c.dominant[1], (unsigned long long)c.probes[0],
            (unsigned long long)c.probes[1], models.c_str(), machine.c_str());
        for (const RateResult& w : windows) {
          if (!w.stall.empty()) std::fprintf(stderr, "%s\n", w.stall.c_str());
        }
        return r;
      };
      double rate = flags.number("start-rate"), passed = 0, failed = 0;
      int step = 0;
      size_t past_50ms = 0;  // consecutive rates over 50 ms
      for (; step < 40; ++step, rate *= flags.number("step")) {
        const RateResult r = measure(rate, step);
        if (r.p99 <= 0.05)
          passed = rate;
        else if (failed == 0 && passed > 0)
          failed = rate;
        past_50ms = r.p99 <= 0.05 ? 0 : past_50ms + 1;
        if (r.p99 > 0.5 || r.missed > r.queries / 20) break;
        if (stop_past > 0 && past_50ms >= stop_past) break;
      }
      // The ladder's steps are coarse (1.3x): between the last rate within 50 ms and the first one
      // past it, halve the gap (geometrically) --refine times, so the highest rate is known to a
      // few percent rather than to a step.
      for (size_t i = 0; i < flags.count("refine") && passed > 0 && failed > passed; ++i) {
        const double mid = std::sqrt(passed * failed);
        (measure(mid, ++step).p99 <= 0.05 ? passed : failed) = mid;
      }
      std::printf("| %s | %.0f | %.0f | rate@p99: %s |\n", name.c_str(), highest_within_50ms(p99_at[name]),
                  best_deadline, p99s.c_str());
      std::fflush(stdout);
    }
    print_targets(load.name, p99_at);
    print_dominance(load.name, delays);
  }
  return 0;
}

}  // namespace
}  // namespace warp

int main(int argc, char** argv) {
  try {
    return warp::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scheduler_bench: %s\n", e.what());
    return 1;
  }
}
