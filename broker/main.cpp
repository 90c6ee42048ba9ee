// warp-broker: the HTTP entry point of a Warpsearch cluster. Fans each query out to one replica of
// every partition (leaves over ZeroMQ), merges the top-k, caches results.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <prometheus/gauge.h>

#include "broker/document_api.hpp"
#include "broker/index_writer.hpp"
#include "broker/search_api.hpp"
#include "common/util/open_files.hpp"
#include "common/util/cpu_wake_latency.hpp"
#include "common/util/flags.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"

namespace {

int run(int argc, char** argv) {
  warp::Flags flags("usage: warp-broker --partition ID=ENDPOINT[,ENDPOINT...]... [--listen HOST:PORT] [flags]");
  flags
      .value(
          "partition", "",
          "a partition and its replicas: ZeroMQ endpoints and/or DNS names resolved every --dns-refresh-ms, e.g. "
          "0=tcp://127.0.0.1:5701,tcp://127.0.0.1:5702 or 0=dns:leaf-p0.warpsearch.svc.cluster.local:5701 (repeatable)",
          true)
      .value("dns-server", "", "DNS server IP[:PORT] for dns: replicas (default: the system's resolvers)")
      .value("dns-refresh-ms", "2000", "how often dns: replica names are resolved again")
      .value("listen", "127.0.0.1:8080", "HTTP address of the search API")
      .value("admin-listen", "",
             "HTTP address for /healthz, /readyz, /cluster and /metrics, never behind a token (default: on --listen)")
      .value("auth-tokens", "",
             "file of bearer tokens, one per line, reloaded on change; /search then needs one (401 without); a file "
             "that is gone accepts no token")
      .boolean("auth-tokens-keep-if-missing", "keep the tokens loaded last when the --auth-tokens file is gone")
      .value("threads", "0",
             "I/O threads serving the HTTP connections and the fan-out to the leaves (0: half the cores)")
      .value("zmq-io-threads", "0", "ZeroMQ I/O threads carrying the fan-out's messages (0: one per eight --threads)")
      .value("search-path", "direct",
             "direct: searches over a leaf's direct search path (TCP, Curve when --curve-keys) where its status offers "
             "one, else ZeroMQ; zmq: always ZeroMQ")
      .value("max-connections", "10000", "open HTTP connections; beyond, 503 and closed")
      .value("max-connections-per-source", "0",
             "open HTTP connections from one address; beyond, 503 and closed (0: no limit; behind a proxy every "
             "client shares its address)")
      .value("max-body-mb-in-flight", "64",
             "MiB of request bodies being read at once, each counted at its declared length from its header; beyond, "
             "503 (0: no limit)")
      .value("request-timeout-ms", "10000", "time to receive a request's header and body, from its first byte")
      .value("idle-timeout-ms", "60000", "time a keep-alive connection may wait for its next request to start")
      .value("max-in-flight", "1024", "queries in the fan-out at once; beyond, 503 with Retry-After")
      .value("max-outstanding", "256", "requests outstanding to one replica; a partition with every replica there: 503")
      .value("timeout-ms", "1000", "time allowed for one query, retries included")
      .value("cache-mb", "64", "result cache budget in MiB")
      .value("cache-ttl-s", "60", "result cache time to live in seconds")
      .value("max-k", "1000", "largest k accepted")
      .value("max-query-bytes", "16384", "longest query text q accepted, in bytes")
      .value("max-terms", "1024", "most distinct analyzed terms a query may have")
      .value("indexer", "",
             "the indexer's write socket (its serve --write endpoint): enables the write API under /indexes/ "
             "(documents put and deleted); empty: no writes")
      .value("max-bulk-mb", "16", "with --indexer: the largest request body of the write API, in MiB")
      .value("after-wait-ms", "10000", "the longest a search with after=SEQUENCE waits for those writes to be served")
      .value("write-timeout-ms", "10000", "with --indexer: time the indexer has to make a request's writes durable")
      .value("curve-keys", "", "CurveZMQ to the leaves: a directory with broker.key and leaf.pub (warp-indexer keys)")
      .value("cpu-wake-latency-us", "",
             "hold a PM QoS request that idle CPUs wake within this many µs (0: they poll) while serving; needs write "
             "access to /dev/cpu_dma_latency");
  flags.parse(argc, argv);
  warp::raise_open_file_limit();  // connections and files: the room the system allows, not the shell's default
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  const auto [host, port] = warp::http::parse_host_port(flags.get("listen"), "--listen");
  // Before anything starts (the cluster's name resolution, the listeners): a bad value is refused
  // like every other flag's.
  if (flags.get("search-path") != "direct" && flags.get("search-path") != "zmq") {
    throw warp::Error("--search-path must be direct or zmq, not '" + flags.get("search-path") + "'");
  }
  warp::install_stop_handlers();

  auto registry = std::make_shared<prometheus::Registry>();
  const auto wake_latency = warp::request_cpu_wake_latency(flags.get("cpu-wake-latency-us"), "warp-broker");
  prometheus::BuildGauge()
      .Name("warpsearch_broker_cpu_wake_latency_request_held")
      .Help("1 while this process holds its --cpu-wake-latency-us request, else 0")
      .Register(*registry)
      .Add({})
      .Set(wake_latency && wake_latency->held() ? 1 : 0);
  warp::DiscoveryOptions discovery;
  discovery.dns_server = flags.get("dns-server");
  discovery.refresh = std::chrono::milliseconds(std::max<uint64_t>(100, flags.count("dns-refresh-ms")));
  warp::Cluster cluster(flags.all("partition"), warp::transfer::load_curve_config(flags.get("curve-keys"), "broker"),
                        discovery);
  warp::ResultCache cache(flags.count("cache-mb") << 20, std::chrono::seconds(flags.count("cache-ttl-s")));
  std::unique_ptr<warp::AuthTokens> auth;
  if (!flags.get("auth-tokens").empty()) {
    auth = std::make_unique<warp::AuthTokens>(flags.get("auth-tokens"), flags.is_set("auth-tokens-keep-if-missing"));
  }
  warp::SearchApiOptions options;
  options.timeout = std::chrono::milliseconds(flags.count("timeout-ms"));
  options.max_query_bytes = flags.count("max-query-bytes");
  options.max_terms = flags.count("max-terms");
  options.max_k = flags.count("max-k");
  options.max_in_flight = flags.count("max-in-flight");
  options.max_outstanding = flags.count("max-outstanding");
  options.auth = auth.get();
  options.admin_listener = !flags.get("admin-listen").empty();
  options.zmq_io_threads = flags.count("zmq-io-threads");
  options.direct_search = flags.get("search-path") == "direct";
  options.after_wait = std::chrono::milliseconds(flags.count("after-wait-ms"));
  std::unique_ptr<warp::IndexWriter> writer;
  std::unique_ptr<warp::DocumentApi> documents;
  if (!flags.get("indexer").empty()) {
    writer = std::make_unique<warp::IndexWriter>(flags.get("indexer"),
                                                 warp::transfer::load_curve_config(flags.get("curve-keys"), "broker"),
                                                 std::chrono::milliseconds(flags.count("write-timeout-ms")));
    documents = std::make_unique<warp::DocumentApi>(warp::DocumentApiOptions{}, *writer);
    options.documents = documents.get();
  }
  if (options.max_query_bytes == 0 || options.max_terms == 0)
    throw warp::Error("--max-query-bytes and --max-terms must be > 0");
  // Half the cores by default: on the GPU machine the cluster's uncached load ran with less CPU a
  // query and lower latency on 8 loops than on 16 (each wake-up of a loop finds more to do; README,
  // Configuration), and a broker's container sees the host's cores, not its share.
  const size_t threads =
      flags.count("threads") > 0 ? flags.count("threads") : std::max(1u, std::thread::hardware_concurrency() / 2);
  warp::http::IoPool pool(threads);
  warp::SearchApi api(options, cluster, cache, registry, pool);

  warp::http::ServerOptions http_options{.address = host, .port = port, .threads = threads};
  // Room for q percent-encoded in a URL (3 bytes a byte) and JSON-escaped in a body (6 a byte).
  http_options.max_header_bytes = 8192 + 3 * options.max_query_bytes;
  http_options.max_body_bytes = 8192 + 6 * options.max_query_bytes;
  if (documents)
    http_options.max_body_bytes = std::max<size_t>(http_options.max_body_bytes, flags.count("max-bulk-mb") << 20);
  http_options.max_connections = flags.count("max-connections");
  http_options.max_connections_per_source = flags.count("max-connections-per-source");
  http_options.max_body_bytes_in_flight = static_cast<uint64_t>(flags.count("max-body-mb-in-flight")) << 20;
  // Tokens checked on the header: a client without one never gets its body read or held.
  http_options.admit = [&api](const warp::http::Request& head) { return api.admit(head); };
  http_options.request_timeout = std::chrono::milliseconds(flags.count("request-timeout-ms"));
  http_options.idle_timeout = std::chrono::milliseconds(flags.count("idle-timeout-ms"));
  std::optional<warp::http::Server> server;
  server.emplace(
      http_options,
      [&](const warp::http::Request& request, warp::http::Respond respond) { api.handle(request, std::move(respond)); },
      &pool);
  std::optional<warp::http::Server> admin;
  if (options.admin_listener) {
    const auto [admin_host, admin_port] = warp::http::parse_host_port(flags.get("admin-listen"), "--admin-listen");
    warp::http::ServerOptions admin_options{.address = admin_host, .port = admin_port, .threads = 1};
    admin.emplace(admin_options, [&](const warp::http::Request& request) { return api.handle_admin(request); });
  }
  api.watch_servers([&] { return server->stats(); });
  std::fprintf(stderr, "warp-broker: listening on http://%s:%u (%zu partitions, %zu I/O threads)%s%s\n", host.c_str(),
               server->port(), cluster.partitions().size(), pool.size(),
               admin ? (", admin on http://" + flags.get("admin-listen")).c_str() : "",
               auth ? ", bearer tokens required" : "");
  warp::wait_for_stop();
  std::fprintf(stderr, "warp-broker: stopping\n");
  admin.reset();
  server.reset();  // closes the connections on the loops
  pool.stop();     // then the loops, before the fan-out that runs on them goes
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return warp::run_main("warp-broker", [&] { return run(argc, argv); });
}
