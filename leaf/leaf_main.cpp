// warp-leaf: serves partitions to brokers over ZeroMQ, from a local index directory or following
// an indexer's published generations; /metrics, /healthz and /readyz over HTTP.
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "common/util/open_files.hpp"
#include "common/http/http_server.hpp"
#include "common/metrics/metrics_text.hpp"
#include "common/query/filter.hpp"
#include "common/util/cpu_wake_latency.hpp"
#include "common/util/flags.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"
#include "leaf/gpu/gpu_flags.hpp"
#include "leaf/sched/scheduler_flags.hpp"
#include "leaf/live/write_tail.hpp"
#include "leaf/service/generation_follower.hpp"

namespace {

std::vector<uint32_t> parse_ids(const std::string& text) {
  std::vector<uint32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    try {
      ids.push_back(static_cast<uint32_t>(std::stoul(item)));
    } catch (...) {
      throw warp::Error("--partitions: '" + item + "' is not a partition id");
    }
  }
  return ids;
}

// A follower's checks of the generations it takes; fail closed: a key, or --unsigned-generations.
warp::transfer::ManifestLimits follower_manifest_limits(const warp::Flags& flags) {
  warp::transfer::ManifestLimits limits;
  if (flags.get("follow").empty()) return limits;
  if (!flags.get("generation-key").empty()) {
    limits.verify_key = warp::transfer::read_verify_key(flags.get("generation-key"));
  } else if (!flags.is_set("unsigned-generations")) {
    throw warp::Error(
        "--follow needs --generation-key FILE (the indexer's generation-signing.pub; warp-indexer signing-key "
        "makes the pair), or --unsigned-generations to take generations nobody signed");
  }
  limits.max_files = flags.count("max-generation-files");
  limits.max_bytes = static_cast<uint64_t>(flags.number("max-generation-gb") * 1e9);
  return limits;
}

// --processor auto: the scheduler's options where a GPU (or --scheduler-cpu-as-gpu's stand-in)
// is there, else none; one line saying which processors this leaf will use, and why.
std::optional<warp::sched::SchedulerOptions> auto_scheduler(const warp::Flags& flags) {
  std::string why;
  if (!flags.is_set("scheduler-cpu-as-gpu") && !warp::gpu::gpu_available(&why)) {
    std::fprintf(stderr, "warp-leaf: --processor auto: no usable GPU (%s); every query on the CPU\n", why.c_str());
    return std::nullopt;
  }
  if (flags.is_set("scheduler-cpu-as-gpu"))
    std::fprintf(stderr, "warp-leaf: --scheduler-cpu-as-gpu: a CPU processor plays the GPU's part\n");
  warp::sched::SchedulerOptions options = warp::sched::scheduler_options_from(flags, true);
  std::fprintf(stderr,
               "warp-leaf: --processor auto: GPU and CPU processors, the scheduler choosing per query (%zu CPU "
               "threads, %zu GPU streams driven by %zu threads)\n",
               options.core.cpu_workers, options.core.gpu_streams, options.gpu_threads);
  return options;
}

// The filters' cache (common/query/filter.hpp, process-wide) in the leaf's metrics: the returned
// function brings them up to date (at each scrape).
std::function<void()> filter_cache_metrics(prometheus::Registry& registry) {
  auto& hits = prometheus::BuildCounter()
                   .Name("warpsearch_leaf_filter_cache_hits_total")
                   .Help("Searches whose filter's documents were in the filters' cache")
                   .Register(registry)
                   .Add({});
  auto& misses = prometheus::BuildCounter()
                     .Name("warpsearch_leaf_filter_cache_misses_total")
                     .Help("Searches whose filter was evaluated over the columns (then cached)")
                     .Register(registry)
                     .Add({});
  auto& bytes = prometheus::BuildGauge()
                    .Name("warpsearch_leaf_filter_cache_bytes")
                    .Help("Bytes of filters' documents in the cache (--filter-cache-mb)")
                    .Register(registry)
                    .Add({});
  auto last = std::make_shared<std::pair<std::mutex, warp::FilterCacheStats>>();
  return [&hits, &misses, &bytes, last] {
    const warp::FilterCacheStats now = warp::filter_cache_stats();
    std::lock_guard<std::mutex> lock(last->first);
    hits.Increment(static_cast<double>(now.hits - last->second.hits));
    misses.Increment(static_cast<double>(now.misses - last->second.misses));
    bytes.Set(static_cast<double>(now.bytes));
    last->second = now;
  };
}

// The leaf's own flags (the GPU's and the scheduler's are declared beside them).
void declare_leaf_flags(warp::Flags& flags) {
  flags.value("index", "", "serve this index directory (or one partition directory)")
      .value("tail", "",
             "with --follow: the indexer's write-log tail (its --tail endpoint): writes through the API are searched "
             "as soon as they are logged, before a generation holds them; empty: only at the next generation")
      .value("tail-interval-ms", "20",
             "with --tail: at least this long between two answers applied while the leaf keeps up (each makes a new "
             "snapshot to search: fewer, larger ones cost searches less; a leaf behind the log applies at once)")
      .value("follow", "", "follow this indexer's announcements (its PUB endpoint) and hot-swap generations")
      .value("root", "", "with --follow: where fetched generations are kept")
      .value("generation-key", "",
             "with --follow: the indexer's public signing key (generation-signing.pub, warp-indexer signing-key); "
             "only generations whose manifest it verifies are taken")
      .boolean("unsigned-generations",
               "with --follow and no --generation-key: take generations whose manifest is not signed (their files "
               "are still checked against its SHA-256 digests); for a network where only the indexer can publish")
      .value("max-generation-files", "100000", "with --follow: files in one generation, at most")
      .value("max-generation-gb", "1024", "with --follow: bytes of one generation's files together, at most (GB)")
      .value("max-generation-step", "1000000", "with --follow: how far beyond the one served a generation may be")
      .value("swap-wait-ms", "10000",
             "with --follow: a new generation waits, loaded, until a broker reads it (every partition has it), so "
             "that all partitions swap together; served after this long regardless")
      .value("partitions", "", "partition ids to serve, comma-separated (default: all)")
      .value("listen", "tcp://127.0.0.1:5701", "ZeroMQ endpoint for broker requests")
      .value("http", "127.0.0.1:9201", "HTTP address for /metrics, /healthz, /readyz")
      .value("workers", "4", "query worker threads")
      .value("search-listen", "",
             "HOST:PORT of the direct search path (TCP beside --listen; Curve when --curve-keys is given): brokers "
             "search over it, status stays on ZeroMQ. Empty: off")
      .value("search-threads", "1",
             "front-end threads of the direct search path, each serving the connections dealt to it")
      .value("handshake-timeout-ms", "3000",
             "with --curve-keys: a direct-path connection whose Curve handshake is not done by then is closed")
      .value("max-unauthenticated", "256", "with --curve-keys: direct-path connections before their handshake, at most")
      .value("max-unauthenticated-per-source", "16",
             "with --curve-keys: direct-path connections before their handshake from one address, at most")
      .value("handshakes-per-second", "2000", "with --curve-keys: direct-path handshakes answered a second, at most")
      .value("handshakes-per-source-per-second", "100",
             "with --curve-keys: direct-path handshakes answered a second for one address, at most")
      .value("inline-max-postings", "20000",
             "CPU searches over at most this many postings are answered on the request thread, without a worker "
             "hand-off (0: none)")
      .value("filter-cache-mb", "256",
             "MiB of filters' documents kept for the filters asked again (a bit a document of a partition; 0: none)")
      .value("max-facet-postings", "50000000",
             "facets are counted over at most this many postings of a query's lists in a partition (past it: not "
             "counted, and the answer says so)")
      .value("processor", "auto",
             "cpu, gpu, or auto (where a GPU is usable: the CPU+GPU scheduler chooses per query; else the CPU)")
      .boolean("scheduler-cpu-as-gpu",
               "with --processor auto on a machine without a GPU: a second CPU processor plays the GPU's part, so "
               "that the scheduler (and its metrics) run; for tests and dashboards, answers are the CPU's")
      .value("gpu-generations", "2",
             "with --follow and --processor auto: generations on the GPU at once; 2: a new one loads beside the one "
             "served (on the CPU first where the GPU cannot hold both), 1: the one served frees the GPU first")
      .value("curve-keys", "",
             "CurveZMQ: a directory with leaf.key, the allowed broker*.pub and indexer.pub (warp-indexer keys)")
      .value("cpu-wake-latency-us", "",
             "hold a PM QoS request that idle CPUs wake within this many µs (0: they poll) while serving; needs write "
             "access to /dev/cpu_dma_latency");
}

int run(int argc, char** argv) {
  warp::Flags flags(
      "usage: warp-leaf (--index DIR | --follow ENDPOINT --root DIR) [--partitions 0,1] [--listen EP] [--http "
      "HOST:PORT]");
  declare_leaf_flags(flags);
  warp::gpu::declare_gpu_flags(flags);
  warp::sched::declare_scheduler_flags(flags);
  flags.parse(argc, argv);
  warp::raise_open_file_limit();  // connections and files: the room the system allows, not the shell's default
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  if (flags.get("index").empty() == flags.get("follow").empty())
    throw warp::Error("give one of --index or --follow\n" + flags.help_text());
  const warp::transfer::ManifestLimits manifest_limits = follower_manifest_limits(flags);
  const std::vector<uint32_t> partitions = parse_ids(flags.get("partitions"));
  const std::string processor = flags.get("processor");
  warp::install_stop_handlers();

  auto registry = std::make_shared<prometheus::Registry>();
  const auto wake_latency = warp::request_cpu_wake_latency(flags.get("cpu-wake-latency-us"), "warp-leaf");
  prometheus::BuildGauge()
      .Name("warpsearch_leaf_cpu_wake_latency_request_held")
      .Help("1 while this process holds its --cpu-wake-latency-us request, else 0")
      .Register(*registry)
      .Add({})
      .Set(wake_latency && wake_latency->held() ? 1 : 0);
  const std::function<void()> refresh_filter_cache = filter_cache_metrics(*registry);
  const warp::transfer::CurveConfig curve =
      warp::transfer::load_curve_config(flags.get("curve-keys"), "leaf", "broker");
  warp::LeafOptions leaf_options{.listen = flags.get("listen"),
                                 .workers = flags.count("workers"),
                                 .queue_depth = 256,
                                 .curve = curve,
                                 .inline_max_postings = flags.count("inline-max-postings"),
                                 .search_listen = flags.get("search-listen")};
  leaf_options.search_threads = std::max<size_t>(1, flags.count("search-threads"));
  leaf_options.max_facet_postings = flags.count("max-facet-postings");
  warp::set_filter_cache_bytes(flags.count("filter-cache-mb") << 20);
  leaf_options.handshake_timeout = std::chrono::milliseconds(flags.count("handshake-timeout-ms"));
  leaf_options.direct_limits.unauthenticated = flags.count("max-unauthenticated");
  leaf_options.direct_limits.unauthenticated_per_source = flags.count("max-unauthenticated-per-source");
  leaf_options.direct_limits.handshakes_per_second = static_cast<double>(flags.count("handshakes-per-second"));
  leaf_options.direct_limits.handshakes_per_source_per_second =
      static_cast<double>(flags.count("handshakes-per-source-per-second"));
  warp::gpu::GpuSettings gpu_settings = warp::gpu::gpu_settings_from(flags);
  gpu_settings.cpu_stand_in = processor == "auto" && flags.is_set("scheduler-cpu-as-gpu");
  if (processor == "auto") leaf_options.scheduler = auto_scheduler(flags);
  warp::LeafServer server(std::move(leaf_options), registry);
  const auto [host, port] = warp::http::parse_host_port(flags.get("http"), "--http");
  warp::http::Server http({.address = host, .port = port, .threads = 2},
                          [&](const warp::http::Request& request) -> warp::http::Response {
                            if (request.path == "/metrics") {
                              server.refresh_device_metrics();
                              refresh_filter_cache();
                              return {200, "text/plain; version=0.0.4", warp::metrics_text(*registry)};
                            }
                            if (request.path == "/healthz") return {200, "application/json", R"({"status":"ok"})"};
                            if (request.path == "/readyz") {
                              const auto index = server.index();
                              if (!index) return {503, "application/json", R"({"ready":false})"};
                              return {200, "application/json",
                                      R"({"ready":true,"generation":)" + std::to_string(index->generation) +
                                          R"(,"write_sequence":)" + std::to_string(index->write_sequence) + "}"};
                            }
                            return {404, "application/json", R"({"error":"not found"})"};
                          });
  std::unique_ptr<warp::WriteTail> tail;  // before the follower: it sees every generation swapped in
  std::unique_ptr<warp::GenerationFollower> follower;
  if (!flags.get("tail").empty()) {
    if (flags.get("follow").empty())
      throw warp::Error("--tail needs --follow (writes apply over followed generations)");
    tail = std::make_unique<warp::WriteTail>(
        warp::TailOptions{.endpoint = flags.get("tail"),
                          .curve = curve,
                          .min_interval_ms = static_cast<uint32_t>(flags.count("tail-interval-ms"))},
        server, *registry);
  }
  if (!flags.get("index").empty()) {
    server.swap_index(warp::load_index(flags.get("index"), partitions, processor, gpu_settings));
  } else {
    if (flags.get("root").empty()) throw warp::Error("--follow needs --root");
    const size_t gpu_generations = flags.count("gpu-generations");
    if (gpu_generations != 1 && gpu_generations != 2) throw warp::Error("--gpu-generations must be 1 or 2");
    follower = std::make_unique<warp::GenerationFollower>(
        warp::FollowOptions{.publish_endpoint = flags.get("follow"),
                            .root = flags.get("root"),
                            .partitions = partitions,
                            .processor = processor,
                            .gpu = gpu_settings,
                            .curve = curve,
                            .gpu_generations = gpu_generations,
                            .manifest_limits = manifest_limits,
                            .max_generation_step = flags.count("max-generation-step"),
                            .swap_wait = std::chrono::milliseconds(flags.count("swap-wait-ms"))},
        server, *registry);
  }
  std::fprintf(stderr, "warp-leaf: serving on %s, http on %s:%u\n", server.endpoint().c_str(), host.c_str(),
               http.port());
  warp::wait_for_stop();
  std::fprintf(stderr, "warp-leaf: stopping\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return warp::run_main("warp-leaf", [&] { return run(argc, argv); });
}
