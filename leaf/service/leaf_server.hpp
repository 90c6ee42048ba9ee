// The leaf service: answers broker requests for the partitions it holds. A ZeroMQ ROUTER front
// end (one thread owns the socket) answers status requests and searches over few postings itself
// and hands the others to a pool of worker threads through a bounded queue, and sends the replies; each request's
// deadline counts from its arrival. The index is held through a shared pointer that a new generation replaces
// atomically: in-flight queries finish on the generation they started with.
#pragma once
#include "common/transfer/curve.hpp"
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/index/partition_store.hpp"
#include "leaf/gpu/gpu_runtime.hpp"
#include "leaf/query/query_processor.hpp"
#include "leaf/sched/scheduler.hpp"
#include "common/util/bounded_queue.hpp"
#include "leaf/service/direct_admission.hpp"

namespace zmq {
class message_t;
}

namespace warp {

struct DirectPeer;

// The partitions a leaf serves from one generation, with their processors: always the CPU one,
// and the GPU one when the leaf runs with --processor gpu, or auto on a machine with a GPU.
struct LoadedIndex {
  uint64_t generation = 0;
  uint64_t write_sequence = 0;  // the writes through the API it holds (its writes.json; 0 without)
  std::string analyzer;
  // Shared: the same generation with GPU processors made later (with_gpu) keeps these.
  std::vector<std::shared_ptr<Partition>> partitions;
  std::vector<std::shared_ptr<QueryProcessor>> cpu;  // same order as partitions
  std::vector<std::unique_ptr<QueryProcessor>> gpu;  // empty without a GPU processor
  bool gpu_only = false;                             // --processor gpu
  // --processor auto on a machine with a GPU that could not load this generation (out of memory, a
  // device it cannot use): why. Its queries then all go to the CPU processors.
  std::string gpu_error;
  // --processor auto with a GPU: the leaf's scheduler chooses per query (LeafOptions::scheduler).
  bool scheduled() const { return !gpu.empty() && !gpu_only; }
  // With writes after the generation (leaf/live/live_writes.hpp): by slot, the documents written
  // since that the partition searches (their records answer for their docIDs). Empty: none.
  std::vector<std::vector<std::shared_ptr<const LiveSegment>>> live{};
  // The record of a document of the partition in `slot`: the generation's, or a written one's.
  std::optional<DocumentRecord> document(size_t slot, DocId doc) const;
};

// Opens the partitions of `index_dir` whose ids are in `wanted` (all when empty) with processor
// "cpu", "gpu" or "auto"; throws Error naming what is wrong. Under "auto", a GPU that fails to
// take the generation leaves it to the CPU (gpu_error says why, in one log line too).
std::shared_ptr<const LoadedIndex> load_index(const std::string& index_dir, const std::vector<uint32_t>& wanted,
                                              const std::string& processor, const gpu::GpuSettings& gpu_settings);

// The generation of `loaded` (opened for the CPU alone) with GPU processors as --processor auto
// makes them: its partitions and CPU processors shared, not opened again (a follower whose GPU
// held the generation before it: the new one was served on the CPU until the GPU was freed).
// A GPU that cannot take it, or none: gpu_error says why and the CPU goes on serving it.
std::shared_ptr<const LoadedIndex> with_gpu(const std::shared_ptr<const LoadedIndex>& loaded,
                                            const gpu::GpuSettings& gpu_settings);

struct LeafOptions {
  std::string listen = "tcp://127.0.0.1:5701";
  size_t workers = 4;
  size_t queue_depth = 256;              // requests waiting beyond this are refused ("overloaded")
  transfer::CurveConfig curve{};         // enabled: CURVE server, brokers from the allow-list only
  uint64_t inline_max_postings = 20000;  // searches over at most this many postings: on the front end (0: none)
  // Facets are counted over at most this many postings of a query's lists in a partition
  // (facet_counts.hpp); past it they are not, and the answer says why.
  uint64_t max_facet_postings = 50'000'000;
  // The direct search path: searches over TCP (secure_channel.hpp's frames, Curve when `curve` is
  // on) on HOST:PORT, beside the ROUTER; the status reply names its port. Empty: off.
  std::string search_listen{};
  size_t search_threads = 1;  // the direct path's front ends, each serving the connections dealt to it
  // What the direct path takes from strangers (direct_admission.hpp); `connections` is capped
  // further by the descriptors the process has left when the path opens. A connection that has not
  // finished its Curve handshake within `handshake_timeout` is closed.
  DirectAdmission::Limits direct_limits{};
  std::chrono::milliseconds handshake_timeout{3000};
  // --processor auto on a machine with a GPU: the CPU+GPU scheduler answers every search of an
  // index with GPU processors (calibrated on the first such index); absent: no scheduler.
  std::optional<sched::SchedulerOptions> scheduler{};
};

class LeafServer {
 public:
  LeafServer(LeafOptions options, std::shared_ptr<prometheus::Registry> registry);
  ~LeafServer();
  // Hot swap to a new generation. `count_gpu_error`: false where the caller will load the
  // generation again with the GPU (GenerationFollower), so a GPU that could not take it beside the
  // old one is not counted as a failure.
  void swap_index(std::shared_ptr<const LoadedIndex> index, bool count_gpu_error = true);
  std::shared_ptr<const LoadedIndex> index() const;
  // A new generation loaded beside the one served, staged until the brokers read it (a request
  // naming it: every partition has it served or staged, so that all swap together as the brokers
  // see them), or until promote_staged(); served at once when nothing is served yet. The generation
  // served before it stays readable for kPreviousKept, for requests that named it before the
  // brokers moved on.
  void stage_index(std::shared_ptr<const LoadedIndex> index, bool count_gpu_error = true);
  // Serves the staged generation if it is at most `generation`; true when it was swapped in.
  bool promote_staged(uint64_t generation = UINT64_MAX);
  uint64_t staged_generation() const { return staged_generation_; }
  // What a request naming `generation` reads (0: the one served): the staged one once swapped in,
  // the one served, or the one before it while it is kept and holds the writes up to `after`;
  // else the one served.
  std::shared_ptr<const LoadedIndex> index_for(uint64_t generation, uint64_t after = 0);
  static constexpr std::chrono::seconds kPreviousKept{5};
  void expire_previous();  // lets the previous generation go once kPreviousKept has passed
  // The writes after the generation (leaf/live/): `over` turns each generation swapped in into what
  // to serve (the generation itself where no write applies); serve_live installs what `make` gives
  // (nothing when it gives null). Both run under one lock, so a generation and the writes over it
  // never cross. base_index() is the generation last swapped in.
  using OverBase = std::function<std::shared_ptr<const LoadedIndex>(std::shared_ptr<const LoadedIndex>)>;
  void set_over_base(OverBase over);
  // The last write through the API of a document id that the served writes hold (none where the
  // generation's copy, if any, is current): a put with its stored form and partition, or a delete.
  struct WrittenCopy {
    bool written = false, put = false;
    uint32_t partition = 0;
    std::string source;
  };
  using WrittenLookup = std::function<WrittenCopy(std::string_view id)>;
  void set_written_lookup(WrittenLookup lookup);  // called under the live lock, as `over` is
  WrittenCopy written(std::string_view id) const;
  void serve_live(const std::function<std::shared_ptr<const LoadedIndex>()>& make);
  std::shared_ptr<const LoadedIndex> base_index() const;
  bool ready() const { return index() != nullptr; }
  const std::string& endpoint() const { return endpoint_; }
  // Brings the GPU memory and Curve metrics up to date (called before each /metrics scrape).
  void refresh_device_metrics();

  // The reply to one LeafRequest frame, as read_request and answer give it (public for the fuzzer
  // and tests).
  std::string handle(const std::string& request, std::chrono::steady_clock::time_point arrival);
  // The same, or nothing when the search went to the scheduler: `deliver` then gets the reply
  // later, on a scheduler thread. `on_cpu_now`: searched here on the CPU processor, never scheduled.
  std::optional<std::string> handle(const std::string& request, std::chrono::steady_clock::time_point arrival,
                                    std::function<void(std::string)> deliver, bool on_cpu_now = false);

 private:
  struct Work;
  // A request as a front end reads it (request_handler.cpp; leaf_request.hpp): the reply already
  // (a status, an error), or a search checked and prepared on its partition, its terms looked up
  // once for the inline decision, the scheduler and the processor.
  struct Request;
  Request read_request(std::string_view bytes, std::chrono::steady_clock::time_point arrival);
  std::string answer_documents(const Request& request);
  // A status or error, and where --inline-max-postings allows, a search over few postings: answered
  // on the front end (the hand-offs to and from a worker would cost more than the search).
  bool answers_inline(const Request& request);
  // The reply, or nothing when the search went to the scheduler (`deliver` then gets it later).
  std::optional<std::string> answer(Request request, std::function<void(std::string)> deliver, bool on_cpu_now);
  void front_end();
  // The direct search path (leaf_direct_path.cpp): its listener, and one thread in epoll over it
  // and every connection, answering as front_end() does.
  void open_direct_listener();
  void direct_front_end(size_t index);
  void close_direct_path();
  void on_direct_frame(const std::shared_ptr<DirectPeer>& peer, std::string request);
  void enqueue(Work work);
  void worker();
  void send_reply(zmq::message_t& identity, const std::string& reply);
  void deliver_later(std::shared_ptr<zmq::message_t> identity, const std::string& reply);
  void answered();  // a request in flight answered

  LeafOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;  // owns the metric families referenced below
  std::string endpoint_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
  mutable std::mutex index_mutex_;
  std::shared_ptr<const LoadedIndex> index_;
  mutable std::mutex live_mutex_;  // the two below, and the order of swaps and live installs
  OverBase over_base_;
  WrittenLookup written_lookup_;
  std::shared_ptr<const LoadedIndex> base_;
  void install(std::shared_ptr<const LoadedIndex> index);
  // Before a generation is served: the scheduler calibrated, its id maps built, its GPU's failure
  // counted. Then serve(): it becomes the base and what the writes over it make is installed.
  void prepare(const LoadedIndex& index, bool count_gpu_error);
  void serve(std::shared_ptr<const LoadedIndex> index);
  std::mutex staged_mutex_;  // one promotion at a time
  std::shared_ptr<const LoadedIndex> staged_;
  std::atomic<uint64_t> staged_generation_{0};
  std::chrono::steady_clock::time_point staged_at_{};
  std::mutex previous_mutex_;
  std::shared_ptr<const LoadedIndex> previous_;  // served before the last promotion, until previous_until_
  std::chrono::steady_clock::time_point previous_until_{};
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> in_flight_{0};
  struct Queue;
  std::unique_ptr<Queue> queue_;
  std::vector<std::thread> threads_;
  int tcp_listener_ = -1;
  std::vector<int> direct_pollers_;            // an epoll per direct-path front end
  std::atomic<size_t> next_direct_poller_{0};  // the front end the next connection goes to
  std::mutex direct_peers_mutex_;              // the connections' owner, for the front ends
  std::unordered_map<const DirectPeer*, std::shared_ptr<DirectPeer>> direct_peers_;
  uint16_t search_port_ = 0;                 // bound, for the status reply
  std::atomic<uint64_t> search_refused_{0};  // direct-path connections refused by the handshake
  uint64_t search_refused_reported_ = 0;
  std::unique_ptr<DirectAdmission> admission_;  // made with the listener
  // Front end 0's: the listener taken out of its epoll while the process has no descriptor left.
  std::chrono::steady_clock::time_point accept_paused_until_{};
  bool accept_paused_ = false;
  std::chrono::steady_clock::time_point next_handshake_sweep_{};
  void accept_direct(int poller);
  void sweep_handshakes();
  // Curve handshakes (three X25519 operations a HELLO, one more an INITIATE) on a thread of their
  // own, in arrival order, so that a flood of HELLOs within the rate limit costs the front ends
  // that answer searches nothing but a queue push. A full queue refuses the connection.
  struct HandshakeStep {
    std::shared_ptr<DirectPeer> peer;
    std::string frame;
  };
  std::unique_ptr<BoundedQueue<HandshakeStep>> handshake_steps_;
  void handshake_thread();
  void handshake_step(HandshakeStep step);
  void refuse_handshake(DirectPeer& peer);
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::atomic<bool> scheduler_calibrated_{false};
  std::mutex completions_mutex_;  // scheduler threads share the socket below

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Counter& search_requests_;  // the hot ones, looked up once
  prometheus::Counter& status_requests_;
  prometheus::Counter& malformed_;
  prometheus::Counter& overloaded_;
  prometheus::Counter& answered_inline_;
  prometheus::Counter& fetched_documents_;
  prometheus::Histogram& latency_cpu_;
  prometheus::Histogram& latency_gpu_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& in_flight_gauge_;
  prometheus::Gauge& partitions_gauge_;
  prometheus::Gauge& generation_gauge_;
  prometheus::Gauge& write_sequence_gauge_;
  prometheus::Gauge& gpu_serving_;
  prometheus::Counter& gpu_load_failures_;
  prometheus::Gauge& gpu_bytes_;
  prometheus::Counter& gpu_hits_;
  prometheus::Counter& gpu_misses_;
  prometheus::Counter& gpu_evictions_;
  prometheus::Counter& curve_refused_;
  prometheus::Family<prometheus::Counter>&
      direct_refused_;  // {reason}: DirectAdmission's, handshake_timeout, descriptors
  uint64_t curve_refused_reported_ = 0;
  std::mutex device_metrics_mutex_;
  const LoadedIndex* device_metrics_index_ = nullptr;  // the totals below are of this index
  DeviceMemoryStats device_metrics_last_;
};

}  // namespace warp
