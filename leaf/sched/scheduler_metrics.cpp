#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "leaf/sched/scheduler_state.hpp"

namespace warp::sched::detail {

using prometheus::Labels;

Metrics::Metrics(prometheus::Registry& r)
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

}  // namespace warp::sched::detail
