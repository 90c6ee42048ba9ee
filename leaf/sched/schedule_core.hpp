// The decisions of the leaf's CPU+GPU scheduler (Ding et al. 2009 §9), apart from threads and
// clocks so that tests drive it with simulated processors and time:
// - Each query gets predicted times on both processors from the cost models (cost_model.hpp) and
//   joins one of three queues: much better on the GPU, much better on the CPU, or flexible. "Much
//   better" compares when the query would be answered, not bare processing times: each
//   processor's backlog (predicted work queued ahead and running) plus the query's own time, on
//   the GPU as a share of a batch with the queries queued for it plus the batch's fixed cost. So
//   the split adapts to load: an idle CPU keeps the short queries that a lone GPU batch would
//   answer later; a saturated one hands them to the GPU, whose batches then grow and amortise.
// - An idle processor takes, in order: a query of its own or the flexible queue that is near its
//   deadline (earliest deadline first); the next query of its own queue or the flexible one (short
//   first: ordered by arrival + aging × predicted time on this processor, so a long query waits at
//   most aging × its own time behind later short ones, and flexible queries are served beside the
//   processor's own, not only when its queue runs dry); a query stolen from the other processor's
//   queue, only when it would finish here before the other processor would even start it; and,
//   when it has answered nothing for a while although the other processor has queries waiting, one
//   of them as a probe, so that its model never stays wrong for want of runs to learn from: the
//   cheapest that the models say it finishes no later than where it waits (so that a probe never
//   costs the query: at low load each search goes where it finishes first), or, by a processor
//   that has finished nothing for a quarter of a second, the cheapest whatever its model says, at
//   most once in a thousand queries.
// - Comparative advantage (off by default until measured on the GPU machine): a query that costs
//   one processor `dominance` times less of its capacity (its time over the processor's workers:
//   CPU threads, GPU streams, the GPU's time as a share of a full batch) joins that processor's
//   queue whatever the backlogs, and the other processor steals such queries only with workers its
//   own work leaves idle (a reserve kept for its bursts). Answer times alone (the rule above) send
//   a long-list query to the CPU whenever the GPU's backlog is longer than its CPU time; under load
//   that filled the CPU's threads with searches it runs 50-100x less efficiently than the GPU, its
//   own short queries spilled to the GPU, and both processors ran each other's work (H100, mixed
//   log: 8 of 13 CPU threads on GOV2-like queries at the limit; tests/bench/results/scheduler.md).
// - The GPU takes batches (PARA, Ao et al. 2011): after its first query, more of the same
//   partition while the batch's predicted time stays under a cap and every member's deadline; so
//   the batch size follows the load instead of a fixed threshold, and a lone query never waits
//   for company.
// - A CPU thread takes its share of the queries waiting for the CPU among the CPU threads free to
//   take them (several short ones once the other threads are busy), in the same order, and answers
//   them one after another: one turn at the scheduler's lock for several queries instead of one
//   each, so the lock does not decide how many queries the cores answer.
// Queries whose deadline passed before they started are set aside (expired) rather than run.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <vector>

#include "leaf/sched/cost_model.hpp"

namespace warp::sched {

enum class Processor : uint8_t { kCpu = 0, kGpu = 1 };
enum class QueueId : uint8_t { kCpu = 0, kGpu = 1, kFlexible = 2 };
const char* to_string(Processor p);
const char* to_string(QueueId q);

// kScheduler is the scheduler; the others are the baselines of the benchmark (Ding et al. Fig. 7):
// every query on the CPU, every query on the GPU (batched), or each query on its better processor
// by the models, one query at a time.
enum class Policy { kScheduler, kCpuOnly, kGpuOnly, kBestOneAtATime };
Policy parse_policy(std::string_view text);  // scheduler | cpu | gpu | best-serial; throws Error

struct CoreOptions {
  Policy policy = Policy::kScheduler;
  size_t cpu_workers = 1;         // CPU runs at once
  size_t gpu_streams = 0;         // GPU runs at once; 0: no GPU
  size_t batch_max = 16;          // queries in a GPU batch
  double batch_seconds = 0.01;    // a batch grows while its predicted time stays under this
  double prefer_ratio = 1.5;      // "much better": answered this much sooner (backlogs included)
  double dominance = 0;           // belongs to a processor: this much less of its capacity (0: off)
  double aging = 4;               // in-queue order: arrival + aging × predicted time
  double urgency = 2;             // near the deadline: slack under urgency × predicted time + 1 ms
  size_t cpu_run_max = 8;         // queries a CPU thread takes at once at most (its share among the free threads)
  double cpu_run_seconds = 5e-4;  // ... while their predicted time stays under this
};

struct Job {
  uint64_t id = 0;
  // The caller's record of the query, carried as is (the run-time scheduler's queued query: owned
  // by whoever holds the job taken from the core, so no lookup by id under its lock).
  void* payload = nullptr;
  size_t slot = 0;  // the partition
  QueryFeatures features;
  bool cpu_only = false;             // no GPU processor for it
  bool gpu_only = false;             // the GPU's queue, never stolen by the CPU while the GPU is usable
  double arrival = 0, deadline = 0;  // seconds on the caller's clock
  // Set on enqueue: predicted seconds on the CPU, the query's share of a GPU batch (without the
  // batch's fixed cost), and the queue.
  double cpu_seconds = 0, gpu_seconds = 0;
  // Share of the CPU's capacity over share of the GPU's (a full batch's) the query takes: > 1, the
  // GPU does it more cheaply.
  double cpu_over_gpu = 1;
  QueueId queue = QueueId::kCpu;
  bool stolen = false, urgent = false;  // how it was taken
  bool probe = false;                   // taken to refresh the taker's model (ScheduleCore::probe)
};

// Jobs dispatched together to one processor: for the CPU, one or several run one after another
// (each job's cpu_seconds then its prediction at the take); for the GPU, a batch of one partition.
struct Dispatch {
  Processor processor = Processor::kCpu;
  std::vector<Job> jobs;
  double predicted = 0;  // seconds, the whole run's
};

struct CoreCounters {
  std::array<uint64_t, 2> steals{};    // taken from the other processor's queue, by taker
  std::array<uint64_t, 2> dominant{};  // joined their processor's queue by comparative advantage
  std::array<uint64_t, 2> urgent{};    // taken ahead for their deadline, by taker
  std::array<uint64_t, 2> probes{};    // taken from the other processor's queue as probes, by taker
  std::array<uint64_t, 3> enqueued{};  // by queue
  uint64_t expired = 0;                // deadline passed before they started
  uint64_t batches = 0, batched_jobs = 0;
};

class ScheduleCore {
 public:
  explicit ScheduleCore(CoreOptions options);

  // Returns the queue the job joined.
  QueueId enqueue(Job job);
  // The next run for an idle `processor`, or an empty run (no jobs) when it should stay idle.
  Dispatch take(Processor processor, double now);
  // A run ended after `seconds`: the processor's model learns from it. A CPU run of several jobs
  // gives each job's own time in `each` (the model is per query), or `folded`: its observations
  // already folded by the caller (CostModel::fold, outside the scheduler's lock). Returns the run's
  // prediction.
  double finished(const Dispatch& run, double seconds, std::span<const double> each = {},
                  const FoldedObservations* folded = nullptr);
  // Jobs whose deadline passed while they waited; the caller answers them with an error.
  std::vector<Job> take_expired();
  // The GPU failed: its queue and the flexible one go to the CPU; the GPU takes nothing more.
  void gpu_lost();
  bool gpu_usable() const { return options_.gpu_streams > 0 && !gpu_lost_; }

  size_t depth(QueueId queue) const { return queues_[static_cast<size_t>(queue)].size(); }
  size_t waiting() const { return depth(QueueId::kCpu) + depth(QueueId::kGpu) + depth(QueueId::kFlexible); }
  CostModel& model(Processor p) { return models_[static_cast<size_t>(p)]; }
  const CostModel& model(Processor p) const { return models_[static_cast<size_t>(p)]; }
  const CoreCounters& counters() const { return counters_; }
  const CoreOptions& options() const { return options_; }
  // Seconds a query queued now for `p` would wait before it starts: predicted from the work
  // queued and running, or as long as the oldest query waiting for `p` has already waited,
  // whichever is longer.
  double backlog(Processor p) const;

 private:
  std::deque<Job>& queue(QueueId q) { return queues_[static_cast<size_t>(q)]; }
  double predicted(const Job& job, Processor p) const;  // alone on `p`
  double urgent_from(const Job& job, Processor p) const;
  void set_aside(const Job& job);  // expired: answered by the caller with an error
  size_t capacity(Processor p) const;
  void account_queued(const Job& job, int sign);
  void drop_expired(double now);
  // The next job for `p` in its order; false, taking nothing, when there is none or the next one
  // is predicted longer than `longest` on `p`. Steals only where `may_steal`.
  bool pick(Processor p, double now, Job& out, bool may_steal = true,
            double longest = std::numeric_limits<double>::infinity());
  void add_cpu_jobs(Dispatch& run, double now);
  bool steal_worthwhile(const Job& job, Processor taker) const;
  // A query of the other processor's queue for `p` to run as a probe: `p` idle (so no probe of its
  // in flight), kProbeIdle past its last run, the last probe kProbeEvery ago (or it came back far
  // faster than predicted), a query predicted to finish on `p` no later than where it waits (any,
  // once `p` has finished nothing for kProbeStarved, once in kBlindProbeEvery queries). False,
  // taking nothing, otherwise.
  bool probe(Processor p, double now, Job& out);
  // From the other processor's queue (its oldest kWindow), the query that suits `p` best against
  // the other processor (least time on `p` over time there) among those a steal may take (worth
  // it, and the reserve for dominant ones kept) or, `probing`, any not pinned to the other: taken
  // out of its queue into `out`. False when there is none.
  bool take_from_other(Processor p, bool probing, Job& out);
  // Whether `job` is `dominance` times cheaper, in capacity, on the processor other than `p`.
  bool belongs_to_other(const Job& job, Processor p) const;
  // A run of `p` that holds a query stolen from the other processor's dominant ones.
  bool dominant_steal(const Dispatch& run) const;
  bool spare_for_dominant_steal(Processor p) const;
  void fill_batch(Dispatch& run, double now);

  CoreOptions options_;
  std::array<CostModel, 2> models_;
  std::array<std::deque<Job>, 3> queues_;
  std::array<double, 2> queued_seconds_{};        // predicted work in each processor's own queue
  std::array<double, 2> running_seconds_{};       // predicted work of runs in progress
  std::array<size_t, 2> busy_{};                  // runs in progress
  std::array<size_t, 2> busy_dominant_steals_{};  // ... of them, runs of queries stolen against their advantage
  std::array<double, 2> own_busy_average_{};      // workers busy with the processor's own queries
  size_t runs_in_progress_ = 0;
  std::array<double, 2> next_probe_{};  // p's next probe no sooner than this
  // When p last finished a run (never: -infinity, so a processor that never ran may be probed).
  std::array<double, 2> last_finished_{-std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity()};
  std::array<uint64_t, 2> arrived_at_blind_probe_{};  // queries enqueued when p last probed blind
  double clock_ = 0;                                  // the latest time seen (arrivals, takes)
  double next_expiry_scan_ = -std::numeric_limits<double>::infinity();
  std::array<double, 2> next_urgency_scan_{-std::numeric_limits<double>::infinity(),
                                           -std::numeric_limits<double>::infinity()};
  bool gpu_lost_ = false;
  std::vector<Job> expired_;
  CoreCounters counters_;
};

}  // namespace warp::sched
