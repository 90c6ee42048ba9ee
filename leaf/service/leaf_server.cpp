#include "leaf/service/leaf_server.hpp"

#include <pthread.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <optional>
#include <zmq.hpp>

#include "common/index/index_files.hpp"
#include "common/transfer/generation_files.hpp"
#include "common/metrics/metrics_text.hpp"
#include "common/protocol/search.capnp.h"
#include "common/transfer/capnp_frames.hpp"
#include "common/util/bounded_queue.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/cpu_query_processor.hpp"
#include "leaf/service/direct_peer.hpp"
#include "leaf/service/leaf_request.hpp"

namespace warp {

namespace {

// --scheduler-cpu-as-gpu: a CPU processor in the GPU's place, so that the scheduler and its
// metrics run on a machine without a GPU; its answers are the CPU's.
class CpuStandIn final : public QueryProcessor {
 public:
  explicit CpuStandIn(const IndexView& index) : cpu_(index) {}
  std::string_view name() const override { return "gpu"; }
  const IndexView& index() const override { return cpu_.index(); }
  using QueryProcessor::search;
  QueryResult search(const PreparedQuery& prepared) const override { return cpu_.search(prepared); }

 private:
  CpuQueryProcessor cpu_;
};

bool gpu_or_stand_in(const gpu::GpuSettings& settings) { return settings.cpu_stand_in || gpu::gpu_available(); }

// GPU processors for every partition of `loaded`. Under auto, a GPU that cannot take the
// generation (a partition too large for its memory, say) leaves it to the CPU rather than the
// leaf refusing it; the processors already made free their memory here.
void add_gpu_processors(LoadedIndex& loaded, const std::string& processor, const gpu::GpuSettings& gpu_settings) {
  gpu::GpuSettings settings = gpu_settings;
  if (processor == "auto") {  // the scheduler forms the GPU's batches
    settings.scheduled = true;
    settings.batch_threshold = 0;
  }
  if (settings.cpu_stand_in && processor == "auto") {
    for (const auto& partition : loaded.partitions)
      loaded.gpu.push_back(std::make_unique<CpuStandIn>(partition->view()));
    return;
  }
  try {
    for (const auto& partition : loaded.partitions)
      loaded.gpu.push_back(gpu::make_gpu_processor(partition->view(), settings));
  } catch (const std::exception& e) {
    if (loaded.gpu_only) throw;
    loaded.gpu.clear();
    loaded.gpu_error = e.what();
    std::fprintf(stderr, "warp-leaf: generation %llu: the GPU cannot serve it (%s); every query of it on the CPU\n",
                 static_cast<unsigned long long>(loaded.generation), e.what());
  }
}

}  // namespace

std::shared_ptr<const LoadedIndex> load_index(const std::string& index_dir, const std::vector<uint32_t>& wanted,
                                              const std::string& processor, const gpu::GpuSettings& gpu_settings) {
  if (processor != "cpu" && processor != "gpu" && processor != "auto")
    throw Error("--processor must be cpu, gpu or auto");
  const bool use_gpu = processor == "gpu" || (processor == "auto" && gpu_or_stand_in(gpu_settings));
  auto loaded = std::make_shared<LoadedIndex>();
  loaded->gpu_only = processor == "gpu";
  OpenOptions open_options;
  open_options.partitions = wanted;  // the others are neither loaded nor, when followed, fetched
  for (auto& partition : open_index(index_dir, open_options)) {
    loaded->generation = partition->view().meta.generation;
    loaded->analyzer = partition->view().meta.analyzer_version;
    loaded->cpu.push_back(std::make_shared<CpuQueryProcessor>(partition->view()));
    loaded->partitions.push_back(std::move(partition));
  }
  if (loaded->partitions.empty())
    throw Error("index " + index_dir + " holds none of the partitions this leaf should serve");
  loaded->write_sequence = transfer::read_write_sequence(index_dir);
  if (use_gpu) add_gpu_processors(*loaded, processor, gpu_settings);
  return loaded;
}

std::shared_ptr<const LoadedIndex> with_gpu(const std::shared_ptr<const LoadedIndex>& loaded,
                                            const gpu::GpuSettings& gpu_settings) {
  auto again = std::make_shared<LoadedIndex>();
  again->generation = loaded->generation;
  again->write_sequence = loaded->write_sequence;
  again->analyzer = loaded->analyzer;
  again->partitions = loaded->partitions;
  again->cpu = loaded->cpu;
  if (!gpu_or_stand_in(gpu_settings)) {
    again->gpu_error = "no usable GPU";
    return again;
  }
  add_gpu_processors(*again, "auto", gpu_settings);
  return again;
}

struct LeafServer::Work {
  zmq::message_t identity;
  Request request;
  std::shared_ptr<DirectPeer> peer;  // set: the reply goes back over this direct-path connection
};

struct LeafServer::Queue {
  explicit Queue(size_t depth) : work(depth) {}
  BoundedQueue<Work> work;
  std::atomic<size_t> size{0};
};

struct LeafServer::Sockets {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  zmq::socket_t replies{context, zmq::socket_type::pull};      // workers push [identity, reply] here
  zmq::socket_t completions{context, zmq::socket_type::push};  // the scheduler's threads, one at a time
  std::unique_ptr<transfer::ZapAuthenticator> zap;  // with Curve: before the router binds, gone before the context
};

LeafServer::LeafServer(LeafOptions options, std::shared_ptr<prometheus::Registry> registry)
    : options_(std::move(options)),
      registry_(registry),
      sockets_(std::make_unique<Sockets>()),
      queue_(std::make_unique<Queue>(options_.queue_depth)),
      requests_(prometheus::BuildCounter()
                    .Name("warpsearch_leaf_requests_total")
                    .Help("Requests by kind and outcome")
                    .Register(*registry)),
      search_requests_(requests_.Add({{"kind", "search"}})),
      status_requests_(requests_.Add({{"kind", "status"}})),
      malformed_(requests_.Add({{"kind", "malformed"}})),
      overloaded_(requests_.Add({{"kind", "overloaded"}})),
      answered_inline_(prometheus::BuildCounter()
                           .Name("warpsearch_leaf_answered_inline_total")
                           .Help("Searches answered on the front-end thread (few postings), without a worker hand-off")
                           .Register(*registry)
                           .Add({})),
      fetched_documents_(prometheus::BuildCounter()
                             .Name("warpsearch_leaf_fetched_documents_total")
                             .Help("Documents asked for by fetch phases and reads by id (stored forms, snippets)")
                             .Register(*registry)
                             .Add({})),
      latency_cpu_(prometheus::BuildHistogram()
                       .Name("warpsearch_leaf_query_seconds")
                       .Help("Query time in the leaf by processor")
                       .Register(*registry)
                       .Add({{"processor", "cpu"}}, latency_buckets())),
      latency_gpu_(prometheus::BuildHistogram()
                       .Name("warpsearch_leaf_query_seconds")
                       .Help("Query time in the leaf by processor")
                       .Register(*registry)
                       .Add({{"processor", "gpu"}}, latency_buckets())),
      queue_depth_(prometheus::BuildGauge()
                       .Name("warpsearch_leaf_queue_depth")
                       .Help("Requests waiting for a worker")
                       .Register(*registry)
                       .Add({})),
      in_flight_gauge_(prometheus::BuildGauge()
                           .Name("warpsearch_leaf_in_flight")
                           .Help("Queries being answered")
                           .Register(*registry)
                           .Add({})),
      partitions_gauge_(prometheus::BuildGauge()
                            .Name("warpsearch_leaf_partitions")
                            .Help("Partitions served")
                            .Register(*registry)
                            .Add({})),
      generation_gauge_(prometheus::BuildGauge()
                            .Name("warpsearch_leaf_generation")
                            .Help("Generation served")
                            .Register(*registry)
                            .Add({})),
      write_sequence_gauge_(prometheus::BuildGauge()
                                .Name("warpsearch_leaf_write_sequence")
                                .Help("The writes through the API the generation served holds (up to this sequence)")
                                .Register(*registry)
                                .Add({})),
      gpu_serving_(prometheus::BuildGauge()
                       .Name("warpsearch_leaf_gpu_serving")
                       .Help("1 when the generation served has GPU processors, 0 when the CPU answers all of it")
                       .Register(*registry)
                       .Add({})),
      gpu_load_failures_(prometheus::BuildCounter()
                             .Name("warpsearch_leaf_gpu_load_failures_total")
                             .Help("Generations the GPU could not load under --processor auto, served on the CPU alone")
                             .Register(*registry)
                             .Add({})),
      gpu_bytes_(prometheus::BuildGauge()
                     .Name("warpsearch_leaf_gpu_bytes_resident")
                     .Help("Index bytes in GPU memory (lists, norms)")
                     .Register(*registry)
                     .Add({})),
      gpu_hits_(prometheus::BuildCounter()
                    .Name("warpsearch_leaf_gpu_list_cache_hits_total")
                    .Help("GPU list cache hits")
                    .Register(*registry)
                    .Add({})),
      gpu_misses_(prometheus::BuildCounter()
                      .Name("warpsearch_leaf_gpu_list_cache_misses_total")
                      .Help("GPU list cache misses (lists copied to the GPU)")
                      .Register(*registry)
                      .Add({})),
      gpu_evictions_(prometheus::BuildCounter()
                         .Name("warpsearch_leaf_gpu_list_cache_evictions_total")
                         .Help("Lists evicted from the GPU list cache")
                         .Register(*registry)
                         .Add({})),
      curve_refused_(prometheus::BuildCounter()
                         .Name("warpsearch_leaf_curve_refused_total")
                         .Help("Connections refused: no Curve key on the allow-list")
                         .Register(*registry)
                         .Add({})),
      direct_refused_(prometheus::BuildCounter()
                          .Name("warpsearch_leaf_direct_refused_total")
                          .Help("Direct search path connections closed or not taken, by reason (connections, "
                                "unauthenticated, source, handshake_rate, handshake_timeout, descriptors)")
                          .Register(*registry)) {
  try {
    sockets_->router.set(zmq::sockopt::linger, 0);
    if (options_.curve.enabled()) {
      sockets_->zap = std::make_unique<transfer::ZapAuthenticator>(sockets_->context, options_.curve.allowed);
      transfer::make_curve_server(sockets_->router, options_.curve);
    }
    sockets_->router.bind(options_.listen);
    sockets_->replies.bind("inproc://replies");
    sockets_->completions.set(zmq::sockopt::linger, 0);
    sockets_->completions.connect("inproc://replies");
  } catch (const zmq::error_t& e) {
    throw Error("leaf: cannot bind " + options_.listen + ": " + e.what());
  }
  endpoint_ = sockets_->router.get(zmq::sockopt::last_endpoint);
  if (options_.scheduler) scheduler_ = std::make_unique<sched::Scheduler>(*options_.scheduler, registry_);
  if (!options_.search_listen.empty()) open_direct_listener();
  // Each thread named for what it does (top -H, /proc/PID/task/TID/comm; at most 15 characters).
  const auto start = [this](const char* name, std::function<void()> body) {
    threads_.emplace_back(std::move(body));
    ::pthread_setname_np(threads_.back().native_handle(), name);
  };
  for (size_t i = 0; i < std::max<size_t>(1, options_.workers); ++i) start("warp-worker", [this] { worker(); });
  start("warp-front", [this] { front_end(); });
  for (size_t i = 0; i < direct_pollers_.size(); ++i) start("warp-direct", [this, i] { direct_front_end(i); });
  if (handshake_steps_) start("warp-handshake", [this] { handshake_thread(); });
}

LeafServer::~LeafServer() {
  scheduler_.reset();  // answers what it holds while the sockets and the front end still run
  stop_ = true;
  queue_->work.close();
  if (handshake_steps_) handshake_steps_->close();
  for (auto& thread : threads_) thread.join();
  close_direct_path();
}

void LeafServer::prepare(const LoadedIndex& index, bool count_gpu_error) {
  if (scheduler_ && index.scheduled() && !scheduler_calibrated_.exchange(true)) {
    // Before the first GPU generation serves: each processor's cost model from synthetic queries.
    const auto start = std::chrono::steady_clock::now();
    scheduler_->calibrate({&index.partitions[0]->view(), index.cpu[0].get(), index.gpu[0].get(), nullptr});
    std::fprintf(stderr, "warp-leaf: scheduler calibrated in %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (count_gpu_error && !index.gpu_error.empty()) gpu_load_failures_.Increment();
  bool tailing = false;
  {
    std::lock_guard<std::mutex> live(live_mutex_);
    tailing = static_cast<bool>(over_base_);
  }
  // The writes served over it look their ids up in its partitions' id maps (built once, lazily,
  // a pass over every document): built here rather than under the lock the tail applies under.
  if (tailing)
    for (const auto& partition : index.partitions) partition->ids();
}

void LeafServer::serve(std::shared_ptr<const LoadedIndex> index) {
  std::lock_guard<std::mutex> live(live_mutex_);
  base_ = index;
  install(over_base_ ? over_base_(std::move(index)) : std::move(index));
}

void LeafServer::swap_index(std::shared_ptr<const LoadedIndex> index, bool count_gpu_error) {
  prepare(*index, count_gpu_error);
  serve(std::move(index));
}

void LeafServer::stage_index(std::shared_ptr<const LoadedIndex> index, bool count_gpu_error) {
  prepare(*index, count_gpu_error);
  std::lock_guard<std::mutex> lock(staged_mutex_);
  if (this->index() == nullptr) {
    serve(std::move(index));
    return;
  }
  staged_generation_ = index->generation;
  staged_ = std::move(index);
  staged_at_ = std::chrono::steady_clock::now();
}

bool LeafServer::promote_staged(uint64_t generation) {
  std::lock_guard<std::mutex> lock(staged_mutex_);
  if (!staged_ || staged_->generation > generation) return false;
  std::shared_ptr<const LoadedIndex> before = index();
  const uint64_t serving = staged_->generation;
  const auto start = std::chrono::steady_clock::now();
  serve(std::move(staged_));  // the writes held rebased on it, under the tail's lock
  const auto end = std::chrono::steady_clock::now();
  staged_.reset();
  staged_generation_ = 0;
  std::fprintf(stderr, "warp-leaf: generation %llu swapped in after %.0f ms staged; the swap took %.1f ms\n",
               static_cast<unsigned long long>(serving),
               std::chrono::duration<double, std::milli>(start - staged_at_).count(),
               std::chrono::duration<double, std::milli>(end - start).count());
  std::lock_guard<std::mutex> previous(previous_mutex_);
  previous_ = std::move(before);
  previous_until_ = std::chrono::steady_clock::now() + kPreviousKept;
  return true;
}

std::shared_ptr<const LoadedIndex> LeafServer::index_for(uint64_t generation, uint64_t after) {
  if (generation != 0) {
    const uint64_t staged = staged_generation_;
    if (staged != 0 && staged <= generation) promote_staged(generation);
  }
  std::shared_ptr<const LoadedIndex> served = index();
  if (generation == 0 || served == nullptr || served->generation == generation) return served;
  std::lock_guard<std::mutex> lock(previous_mutex_);
  if (previous_ && previous_->generation == generation && previous_->write_sequence >= after &&
      std::chrono::steady_clock::now() < previous_until_)
    return previous_;
  return served;
}

void LeafServer::expire_previous() {
  std::shared_ptr<const LoadedIndex> expired;  // released outside the lock
  std::lock_guard<std::mutex> lock(previous_mutex_);
  if (previous_ && std::chrono::steady_clock::now() >= previous_until_) expired = std::move(previous_);
}

void LeafServer::install(std::shared_ptr<const LoadedIndex> index) {
  partitions_gauge_.Set(static_cast<double>(index->partitions.size()));
  generation_gauge_.Set(static_cast<double>(index->generation));
  write_sequence_gauge_.Set(static_cast<double>(index->write_sequence));
  gpu_serving_.Set(index->gpu.empty() ? 0 : 1);
  std::lock_guard<std::mutex> lock(index_mutex_);
  index_ = std::move(index);
}

void LeafServer::set_over_base(OverBase over) {
  std::lock_guard<std::mutex> live(live_mutex_);
  over_base_ = std::move(over);
}

void LeafServer::set_written_lookup(WrittenLookup lookup) {
  std::lock_guard<std::mutex> live(live_mutex_);
  written_lookup_ = std::move(lookup);
}

LeafServer::WrittenCopy LeafServer::written(std::string_view id) const {
  std::lock_guard<std::mutex> live(live_mutex_);
  return written_lookup_ ? written_lookup_(id) : WrittenCopy{};
}

void LeafServer::serve_live(const std::function<std::shared_ptr<const LoadedIndex>()>& make) {
  std::lock_guard<std::mutex> live(live_mutex_);
  if (auto index = make()) install(std::move(index));
}

std::shared_ptr<const LoadedIndex> LeafServer::base_index() const {
  std::lock_guard<std::mutex> live(live_mutex_);
  return base_;
}

std::optional<DocumentRecord> LoadedIndex::document(size_t slot, DocId doc) const {
  if (auto record = partitions[slot]->document(doc)) return record;
  if (slot < live.size())
    for (const auto& segment : live[slot])
      if (auto record = segment->document(doc)) return record;
  return std::nullopt;
}

void LeafServer::refresh_device_metrics() {
  if (sockets_->zap) {
    std::lock_guard<std::mutex> lock(device_metrics_mutex_);
    const uint64_t refused = sockets_->zap->refused();
    curve_refused_.Increment(static_cast<double>(refused - curve_refused_reported_));
    curve_refused_reported_ = refused;
    const uint64_t direct = search_refused_;
    curve_refused_.Increment(static_cast<double>(direct - search_refused_reported_));
    search_refused_reported_ = direct;
  }
  const auto index = this->index();
  if (!index) return;
  DeviceMemoryStats sum;
  for (const auto& processor : index->gpu) {
    const DeviceMemoryStats s = processor->device_memory();
    sum.bytes_resident += s.bytes_resident;
    sum.list_cache_hits += s.list_cache_hits;
    sum.list_cache_misses += s.list_cache_misses;
    sum.list_cache_evictions += s.list_cache_evictions;
  }
  std::lock_guard<std::mutex> lock(device_metrics_mutex_);
  if (index.get() != device_metrics_index_) {  // a new generation's processors count from zero
    device_metrics_index_ = index.get();
    device_metrics_last_ = {};
  }
  gpu_bytes_.Set(static_cast<double>(sum.bytes_resident));
  gpu_hits_.Increment(static_cast<double>(sum.list_cache_hits - device_metrics_last_.list_cache_hits));
  gpu_misses_.Increment(static_cast<double>(sum.list_cache_misses - device_metrics_last_.list_cache_misses));
  gpu_evictions_.Increment(static_cast<double>(sum.list_cache_evictions - device_metrics_last_.list_cache_evictions));
  device_metrics_last_ = sum;
}

std::shared_ptr<const LoadedIndex> LeafServer::index() const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  return index_;
}

void LeafServer::send_reply(zmq::message_t& identity, const std::string& reply) {
  sockets_->router.send(identity, zmq::send_flags::sndmore);
  sockets_->router.send(zmq::message_t(), zmq::send_flags::sndmore);
  sockets_->router.send(zmq::buffer(reply), zmq::send_flags::none);
}

// Owns the ROUTER. Status requests and searches over few postings (--inline-max-postings) are
// answered here at once: for such a query the search takes microseconds, and the two thread
// hand-offs to and from a worker would cost more than the search. Longer ones go to the workers.
// Each wake-up drains every request and reply waiting, so one poll serves a burst.
void LeafServer::front_end() {
  zmq::pollitem_t items[] = {{sockets_->router.handle(), 0, ZMQ_POLLIN, 0},
                             {sockets_->replies.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stop_) {
    zmq::poll(items, 2, std::chrono::milliseconds(100));
    for (;;) {  // workers' replies: [identity][reply]
      zmq::message_t identity, reply;
      if (!sockets_->replies.recv(identity, zmq::recv_flags::dontwait)) break;
      if (!sockets_->replies.recv(reply)) break;
      sockets_->router.send(identity, zmq::send_flags::sndmore);
      sockets_->router.send(zmq::message_t(), zmq::send_flags::sndmore);
      sockets_->router.send(reply, zmq::send_flags::none);
    }
    for (;;) {  // requests: [identity][empty][request]
      std::vector<zmq::message_t> frames;
      frames.emplace_back();
      if (!sockets_->router.recv(frames.back(), zmq::recv_flags::dontwait)) break;
      while (frames.back().more()) {
        frames.emplace_back();
        if (!sockets_->router.recv(frames.back())) break;
      }
      if (frames.size() != 3) {
        malformed_.Increment();
        continue;
      }
      Request request = read_request(std::string_view(static_cast<const char*>(frames[2].data()), frames[2].size()),
                                     std::chrono::steady_clock::now());
      if (answers_inline(request)) {
        send_reply(frames[0], *answer(std::move(request), {}, /*on_cpu_now=*/true));
        continue;
      }
      enqueue({std::move(frames[0]), std::move(request), nullptr});
    }
  }
}

// A full queue refuses rather than block the front end: the broker's attempt timeout moves the
// query to another replica.
void LeafServer::enqueue(Work work) {
  if (queue_->size >= options_.queue_depth) {
    overloaded_.Increment();
    return;
  }
  ++queue_->size;
  queue_depth_.Set(static_cast<double>(queue_->size));
  queue_->work.push(std::move(work));
}

// A request of the direct search path, on its front end: answered there when small, as
// front_end() does, else handed to a worker with its connection.
void LeafServer::on_direct_frame(const std::shared_ptr<DirectPeer>& peer, std::string bytes) {
  Request request = read_request(bytes, std::chrono::steady_clock::now());
  if (answers_inline(request)) {
    peer->write_frame(*answer(std::move(request), {}, /*on_cpu_now=*/true));
    return;
  }
  enqueue({zmq::message_t(), std::move(request), peer});
}

void LeafServer::deliver_later(std::shared_ptr<zmq::message_t> identity, const std::string& reply) {
  std::lock_guard<std::mutex> lock(completions_mutex_);
  sockets_->completions.send(*identity, zmq::send_flags::sndmore);
  sockets_->completions.send(zmq::buffer(reply), zmq::send_flags::none);
  answered();
}

void LeafServer::answered() {
  --in_flight_;
  in_flight_gauge_.Set(in_flight_);
}

// A request's answer goes back the way it came: over its direct-path connection, or to the ROUTER
// (through this worker's PUSH socket now, or the completions socket when a scheduler thread
// answers it later).
void LeafServer::worker() {
  zmq::socket_t push(sockets_->context, zmq::socket_type::push);
  push.connect("inproc://replies");
  while (auto work = queue_->work.pop()) {
    --queue_->size;
    queue_depth_.Set(static_cast<double>(queue_->size));
    ++in_flight_;
    in_flight_gauge_.Set(in_flight_);
    const std::shared_ptr<DirectPeer> peer = std::move(work->peer);
    std::shared_ptr<zmq::message_t> identity;
    std::function<void(std::string)> later;
    if (peer) {
      later = [this, peer](std::string reply) { peer->write_frame(reply), answered(); };
    } else {
      identity = std::make_shared<zmq::message_t>(std::move(work->identity));
      later = [this, identity](std::string reply) { deliver_later(identity, reply); };
    }
    const std::optional<std::string> reply = answer(std::move(work->request), std::move(later), /*on_cpu_now=*/false);
    if (!reply) continue;  // the scheduler answers it
    answered();
    if (peer) {
      peer->write_frame(*reply);
    } else {
      push.send(*identity, zmq::send_flags::sndmore);
      push.send(zmq::buffer(*reply), zmq::send_flags::none);
    }
  }
}

}  // namespace warp
