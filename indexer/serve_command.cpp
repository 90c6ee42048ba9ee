#include "indexer/serve_command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <thread>

#include "common/http/http_server.hpp"
#include "common/index/index_files.hpp"
#include "common/transfer/fetcher.hpp"
#include "common/util/service.hpp"
#include "common/util/status.hpp"
#include "indexer/indexer_metrics.hpp"
#include "indexer/publisher.hpp"
#include "indexer/writes/live_ids.hpp"
#include "indexer/writes/tail_endpoint.hpp"
#include "indexer/writes/write_endpoint.hpp"
#include "indexer/writes/write_log.hpp"

namespace warp {
namespace fs = std::filesystem;

namespace {

void log_line(const std::string& text) {
  std::fprintf(stderr, "warp-indexer: %s\n", text.c_str());
  std::fflush(stderr);
}

// What a generation is built from, and how: every input file with its size and modification time,
// and the settings that shape its partitions (their count, the codec, the analyzer, BM25's
// parameters, the partition format this build writes). A generation whose inputs.json says
// otherwise is built again: its inputs changed, or the service restarted with other settings, or
// it was upgraded to a build that writes a newer format, whose searches use what that format
// holds (a generation of format 1, from before the terms' best postings, had been served on after
// an upgrade, its CPU searches twice as long).
std::string build_fingerprint(const std::vector<std::string>& inputs, const BuildOptions& build) {
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& file : expand_input_paths(inputs)) {
    files.push_back({{"path", file},
                     {"size", fs::file_size(file)},
                     {"mtime", fs::last_write_time(file).time_since_epoch().count()}});
  }
  const auto decimal = [](float value) { return std::to_string(value); };  // "inf" too, which JSON has not
  const nlohmann::json settings = {{"format_version", kFormatVersion},
                                   {"partitions", build.partitions},
                                   {"codec", build.codec},
                                   {"analyzer", build.analyzer.version()},
                                   {"store", build.store},
                                   {"positions", build.positions},
                                   {"columns", build.columns.describe()},
                                   {"bm25", {decimal(build.bm25.k1), decimal(build.bm25.b), decimal(build.bm25.k3)}}};
  return nlohmann::json{{"inputs", files}, {"build", settings}}.dump();
}

uint64_t latest_generation(const fs::path& root) {
  uint64_t latest = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const std::optional<uint64_t> generation = transfer::parse_generation_dir_name(name);
    if (generation && fs::exists(entry.path() / kManifestName)) latest = std::max(latest, *generation);
  }
  return latest;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Generations older than `keep_from` (the one before the generation announced) are served no more
// and removed: a leaf fetches the latest, and one that started on the one before may finish.
void prune_before(const fs::path& root, uint64_t keep_from, Publisher& publisher) {
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const std::optional<uint64_t> generation = transfer::parse_generation_dir_name(name);
    if (!generation || *generation >= keep_from) continue;
    publisher.forget(*generation);
    std::error_code error;
    fs::remove_all(entry.path(), error);
    log_line("removed generation " + std::to_string(*generation) + (error ? " (partly: " + error.message() + ")" : ""));
  }
}

// What /readyz reports: ready once a generation is announced (the leaves have something to fetch),
// and whether a build is under way.
struct ServeState {
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> building{false};
};

// /metrics, /healthz and /readyz on the services' own HTTP server (asynchronous: an idle connection
// holds a socket, never a thread; HEAD answered as GET without the body).
std::unique_ptr<http::Server> serve_http(const std::string& address, const IndexerMetrics& metrics,
                                         const ServeState& state) {
  if (address.empty()) return nullptr;
  const auto [host, port] = http::parse_host_port(address, "--metrics");
  return std::make_unique<http::Server>(
      http::ServerOptions{.address = host, .port = port, .threads = 1},
      [&metrics, &state](const http::Request& request) -> http::Response {
        if (request.path == "/metrics") return {200, "text/plain; version=0.0.4", metrics.text()};
        if (request.path == "/healthz") return {200, "application/json", R"({"status":"ok"})"};
        if (request.path == "/readyz") {
          const uint64_t generation = state.generation.load();
          const std::string building = state.building.load() ? "true" : "false";
          if (generation == 0) return {503, "application/json", R"({"ready":false,"building":)" + building + "}"};
          return {200, "application/json",
                  R"({"ready":true,"generation":)" + std::to_string(generation) + R"(,"building":)" + building + "}"};
        }
        return {404, "application/json", R"({"error":"not found: /metrics, /healthz, /readyz"})"};
      });
}

// Builds generation `generation` into ROOT/gen-N.tmp from the inputs and, with a write log, its
// writes up to `writes_up_to` (the documents they leave, read after the inputs so that their copy
// of an id wins; the ids they delete left out), renames it into place, announces it and removes
// older ones. False when there was nothing to publish (no documents). Throws on a failed build.
bool build_generation(const ServeOptions& options, const fs::path& root, uint64_t generation,
                      const std::string& fingerprint, const writes::WriteLog* log, uint64_t writes_up_to,
                      IndexerMetrics& metrics, ServeState& state, Publisher& publisher) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path tmp = root / (transfer::generation_dir_name(generation) + ".tmp");
  log_line("building generation " + std::to_string(generation));
  state.building = true;
  pipeline::PipelineOptions pipeline_options = options.pipeline;
  pipeline_options.build = options.build;
  pipeline_options.build.generation = generation;
  pipeline_options.spill_dir = (root / (transfer::generation_dir_name(generation) + ".runs")).string();
  std::vector<std::string> inputs = options.inputs;
  const fs::path written = root / (transfer::generation_dir_name(generation) + ".runs.writes.jsonl");
  if (log != nullptr) {
    const writes::LogState writes = writes::write_live_documents(*log, writes_up_to, written.string());
    inputs.push_back(written.string());
    pipeline_options.excluded_ids =
        std::make_shared<std::unordered_set<std::string>>(writes.deleted_ids.begin(), writes.deleted_ids.end());
  }
  ReadReport read;
  const auto show = [&](const pipeline::PipelineProgress& p) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = seconds > 0 ? p.bytes / seconds : 0;
    metrics.build_bytes.Set(static_cast<double>(p.bytes));
    metrics.build_total_bytes.Set(static_cast<double>(p.total_bytes));
    metrics.build_rate.Set(rate);
    metrics.build_eta.Set(rate > 0 && p.total_bytes > p.bytes ? (p.total_bytes - p.bytes) / rate : 0);
    metrics.build_documents.Set(static_cast<double>(p.documents));
  };
  pipeline::PipelineReport report;
  try {
    report = pipeline::build_index(inputs, pipeline_options, tmp.string(), read, show);
  } catch (...) {
    show({});
    state.building = false;
    std::error_code ignored;
    fs::remove(written, ignored);
    throw;
  }
  std::error_code ignored;
  fs::remove(written, ignored);
  show({});
  state.building = false;
  for (const std::string& error : read.errors) log_line("rejected " + error);
  metrics.documents.Increment(static_cast<double>(read.documents));
  metrics.bytes.Increment(static_cast<double>(read.bytes));
  metrics.rejected.Increment(static_cast<double>(read.rejected));
  metrics.replaced.Increment(static_cast<double>(read.replaced));
  metrics.deleted_skipped.Increment(static_cast<double>(report.excluded));
  metrics.runs_written.Increment(static_cast<double>(report.runs_written));
  metrics.runs_merged.Increment(static_cast<double>(report.runs_merged));
  metrics.gpu_documents.Increment(static_cast<double>(report.gpu_analysis_documents));
  metrics.gpu_tokens.Increment(static_cast<double>(report.gpu_analysis_tokens));
  metrics.gpu_misses.Increment(static_cast<double>(report.gpu_analysis_misses));
  if (!report.gpu_analysis_failure.empty()) {
    metrics.gpu_failures.Increment();
    log_line("the GPU analysis failed during the build (" + report.gpu_analysis_failure +
             "); the CPU analyzed the rest");
  }
  if (report.partitions.empty()) {
    log_line("no documents in the inputs; nothing published");
    return false;
  }
  std::ofstream(tmp / "inputs.json") << fingerprint;
  transfer::write_write_sequence(tmp.string(), writes_up_to);
  fs::rename(tmp, root / transfer::generation_dir_name(generation));  // complete, atomically
  publisher.announce(generation);
  prune_before(root, generation - 1, publisher);
  state.generation = generation;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics.generations.Increment();
  metrics.generation.Set(static_cast<double>(generation));
  metrics.build_seconds.Set(seconds);
  char line[256];
  std::snprintf(line, sizeof line, "published generation %llu: %llu documents, %zu partitions, writes to %llu, %.2f s",
                static_cast<unsigned long long>(generation), static_cast<unsigned long long>(read.documents),
                report.partitions.size(), static_cast<unsigned long long>(writes_up_to), seconds);
  log_line(line);
  return true;
}

// --tail-threads: 0 is a quarter of the cores, within 1..8 (the tail's serial part, about a third of
// a write's work, bounds what more threads give).
size_t tail_analysis_threads(size_t asked) {
  if (asked > 0) return asked;
  return std::clamp<size_t>(std::thread::hardware_concurrency() / 4, 1, 8);
}

}  // namespace

int run_serve_command(const ServeOptions& options) {
  install_stop_handlers();
  const fs::path root = options.root;
  fs::create_directories(root);
  for (const auto& entry : fs::directory_iterator(root)) {  // what a killed indexer left
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp") != std::string::npos || name.find(".runs") != std::string::npos) {
      log_line("removing incomplete " + entry.path().string() + " from an earlier run");
      fs::remove_all(entry.path());
    }
  }
  IndexerMetrics metrics;
  ServeState state;
  const std::unique_ptr<http::Server> http_server = serve_http(options.metrics_address, metrics, state);
  Publisher publisher(
      {.root = root.string(),
       .publish_endpoint = options.publish_endpoint,
       .fetch_endpoint = options.fetch_endpoint,
       .curve = transfer::load_curve_config(options.curve_keys, "indexer", "leaf"),
       .signing_key = options.signing_key.empty() ? std::string() : transfer::read_signing_key(options.signing_key)});
  if (options.signing_key.empty())
    log_line("announcing unsigned manifests (no --signing-key): leaves take them only with --unsigned-generations");
  log_line("publishing on " + publisher.publish_endpoint() + ", serving files on " + publisher.fetch_endpoint() +
           (http_server ? ", /metrics, /healthz and /readyz on http://" + options.metrics_address : ""));
  uint64_t latest = latest_generation(root);
  if (latest > 0) {
    publisher.announce(latest);
    metrics.generation.Set(static_cast<double>(latest));
    state.generation = latest;
    log_line("announcing existing generation " + std::to_string(latest));
  }
  // Writes through the API (--write): the log, and the socket brokers send them to. The socket goes
  // before the log (its last appends answered first).
  std::atomic<uint64_t> folded{
      latest > 0 ? transfer::read_write_sequence((root / transfer::generation_dir_name(latest)).string()) : 0};
  metrics.folded_sequence.Set(static_cast<double>(folded));
  std::unique_ptr<writes::WriteLog> log;
  std::unique_ptr<writes::LiveIds> ids;
  std::string ids_inputs;                      // the inputs' fingerprint of the generation whose ids `ids` holds
  std::unique_ptr<writes::TailEndpoint> tail;  // after the log, before the write socket
  std::unique_ptr<writes::WriteEndpoint> endpoint;
  if (!options.write_endpoint.empty()) {
    log = std::make_unique<writes::WriteLog>((root / "writes.log").string());
    if (log->truncated_bytes() > 0)
      log_line("write log: cut off " + std::to_string(log->truncated_bytes()) + " bytes of a write torn by a crash");
    const fs::path dir = root / transfer::generation_dir_name(latest);
    ids = std::make_unique<writes::LiveIds>(latest > 0 ? dir.string() : std::string(), folded.load(), *log);
    ids_inputs = latest > 0 ? read_file(dir / "inputs.json") : std::string();
    if (!options.tail_endpoint.empty()) {
      const std::string fingerprint_at_latest = latest > 0 ? read_file(dir / "inputs.json") : std::string();
      tail = std::make_unique<writes::TailEndpoint>(options.tail_endpoint, *log, options.build.analyzer,
                                                    latest > 0 ? dir.string() : std::string(), latest, folded.load(),
                                                    fingerprint_at_latest, tail_analysis_threads(options.tail_threads),
                                                    transfer::load_curve_config(options.curve_keys, "indexer", "leaf"));
      log_line("serving the write log's tail to leaves on " + tail->endpoint());
    }
    writes::TailEndpoint* tailing = tail.get();
    endpoint = std::make_unique<writes::WriteEndpoint>(
        options.write_endpoint, *log,
        writes::WriteEndpointOptions{
            .folded = [&folded] { return folded.load(); },
            .ids = ids.get(),
            .applied_by_leaves = [tailing] { return tailing ? tailing->applied_by_leaves() : UINT64_MAX; },
            .max_apply_lag = options.max_apply_lag,
            .curve = transfer::load_curve_config(options.curve_keys, "indexer", "broker")});
    log_line("taking writes on " + endpoint->endpoint() + " (the log at " + std::to_string(log->last_sequence()) +
             ", generation " + std::to_string(latest) + " holds writes to " + std::to_string(folded.load()) + ")");
  }
  // The builds below run at a lower priority than what serves (--build-nice): Linux gives each
  // thread its own nice value and a new thread its creator's, so raising this thread's now, after
  // the sockets' and the log's threads are made, lowers every build thread (and RocksDB's) alone.
  if (options.build_nice > 0 && ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), options.build_nice) != 0)
    log_line("--build-nice: cannot lower the builds' priority (" + std::string(std::strerror(errno)) + ")");
  auto last_build = std::chrono::steady_clock::now() - std::chrono::hours(1);
  // Writes wait for a fold once --fold-interval-ms has passed since the last build began, or sooner
  // when --fold-max-writes of them are waiting (what leaves hold over their generation).
  const auto writes_waiting = [&] {
    if (!log || log->last_sequence() <= folded) return false;
    return log->last_sequence() - folded >= options.fold_max_writes ||
           std::chrono::steady_clock::now() - last_build >= std::chrono::milliseconds(options.fold_interval_ms);
  };
  uint64_t fetches_seen = 0;
  bool built_once = false;
  while (!stop_requested()) {
    std::string fingerprint;
    try {
      fingerprint = build_fingerprint(options.inputs, options.build);
    } catch (const std::exception& e) {  // the inputs gone or unreadable: counted as a failed build
      metrics.builds_failed.Increment();
      log_line(std::string("cannot read the inputs, retrying at the next rescan: ") + e.what());
    }
    const bool changed = !fingerprint.empty() &&
                         (latest == 0 || writes_waiting() ||
                          read_file(root / transfer::generation_dir_name(latest) / "inputs.json") != fingerprint) &&
                         !(options.inputs.empty() && !writes_waiting());  // nothing at all to build from
    if (changed && !(options.once && built_once)) try {
        const uint64_t writes_up_to = log ? log->last_sequence() : 0;
        last_build = std::chrono::steady_clock::now();
        built_once = true;
        if (build_generation(options, root, latest + 1, fingerprint, log.get(), writes_up_to, metrics, state,
                             publisher)) {
          latest = latest + 1;
          folded = writes_up_to;
          metrics.folded_sequence.Set(static_cast<double>(folded));
          const std::string dir = (root / transfer::generation_dir_name(latest)).string();
          if (tail) tail->published(dir, latest, folded, fingerprint);
          if (ids) try {
              ids->published(dir, folded, fingerprint != ids_inputs);
              ids_inputs = fingerprint;
            } catch (const std::exception& e) {  // the ids before it, and the writes since, still hold
              log_line(std::string("cannot read the ids of the new generation: ") + e.what());
            }
        }
      } catch (const std::exception& e) {
        // A failed build (unreadable input, a full disk) publishes nothing, is counted, and is tried
        // again at the next rescan; the generation already published keeps being served.
        metrics.builds_failed.Increment();
        log_line(std::string("build failed, retrying at the next rescan: ") + e.what());
        std::error_code ignored;
        fs::remove_all(root / (transfer::generation_dir_name(latest + 1) + ".tmp"), ignored);
        fs::remove_all(root / (transfer::generation_dir_name(latest + 1) + ".runs"), ignored);
      }
    // Until the next rescan, or until writes are waiting and --fold-interval-ms has passed since
    // the last build began.
    for (int i = 0; i < static_cast<int>(options.rescan_seconds * 100) && !stop_requested(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const uint64_t fetches = publisher.counters().fetch_requests;
      metrics.fetch_requests.Increment(static_cast<double>(fetches - fetches_seen));
      fetches_seen = fetches;
      if (log) {
        metrics.write_ops.Increment(static_cast<double>(log->last_sequence()) - metrics.write_sequence.Value());
        metrics.write_sequence.Set(static_cast<double>(log->last_sequence()));
        metrics.write_log_bytes.Set(static_cast<double>(log->bytes()));
        metrics.live_documents.Set(static_cast<double>(ids->size()));
        metrics.writes_held_back.Increment(static_cast<double>(endpoint->held_back()) -
                                           metrics.writes_held_back.Value());
      }
      if (tail) {
        const uint64_t applied = tail->applied_by_leaves(), last = log->last_sequence();
        metrics.apply_lag.Set(applied == UINT64_MAX || applied >= last ? 0.0 : static_cast<double>(last - applied));
        metrics.tailing_leaves.Set(static_cast<double>(tail->tailers()));
      }
      if (writes_waiting() && !(options.once && built_once)) break;
    }
  }
  log_line("stopping (signal received)");
  return 0;
}

int run_fetch_command(const FetchCommandOptions& options) {
  const transfer::CurveConfig curve = transfer::load_curve_config(options.curve_keys, "leaf");
  transfer::GenerationSubscriber subscriber(options.from, curve);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  if (options.generation_key.empty() && !options.unsigned_generations)
    throw Error("give --generation-key FILE (the indexer's generation-signing.pub) or --unsigned-generations");
  const auto announcement = subscriber.next(timeout);
  if (!announcement) {
    std::fprintf(stderr, "warp-indexer fetch: no announcement from %s within %.0f s\n", options.from.c_str(),
                 options.timeout_seconds);
    return 1;
  }
  transfer::ManifestLimits limits;
  if (!options.generation_key.empty()) limits.verify_key = transfer::read_verify_key(options.generation_key);
  const transfer::GenerationManifest manifest = transfer::open_announcement(*announcement, limits);
  transfer::FetchStats stats;
  transfer::FetchOptions fetch;
  fetch.curve = curve;
  const std::string dir = transfer::fetch_generation(manifest, options.root, fetch, stats);
  std::fprintf(stderr, "fetched generation %llu: %zu files, %.1f MB, %llu chunks, %llu retries\n",
               static_cast<unsigned long long>(manifest.generation), manifest.files.size(), stats.bytes / 1e6,
               static_cast<unsigned long long>(stats.chunks), static_cast<unsigned long long>(stats.retries));
  std::printf("%s\n", dir.c_str());
  return 0;
}

}  // namespace warp
