// warp-indexer: builds Warpsearch partitions from document files (build), runs as the indexer
// service that publishes generations (serve), fetches a published generation (fetch), makes
// CurveZMQ keys (keys) or the key pair generations are signed with (signing-key), or prints a digest of an index's
// content (digest).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/index/partition_store.hpp"
#include "common/transfer/curve.hpp"
#include "common/transfer/generation_manifest.hpp"
#include "common/util/flags.hpp"
#include "common/util/status.hpp"
#include "indexer/serve_command.hpp"

namespace {

constexpr const char* kUsage =
    "usage: warp-indexer build --input PATH... --out DIR [--partitions P] [flags]\n"
    "       warp-indexer serve --input PATH... --root DIR [--publish EP] [--fetch EP] [--metrics ADDR] [flags]\n"
    "       warp-indexer fetch --from EP --root DIR (--generation-key FILE | --unsigned-generations)\n"
    "       warp-indexer keys --out DIR | warp-indexer signing-key --out DIR\n"
    "       warp-indexer digest DIR\n"
    "\n"
    "Inputs: JSONL ({\"id\",\"title\",\"body\",\"url\"?} per line), TREC SGML and WARC (plain or .gz) files or\n"
    "directories of them. build writes DIR/part-NNNN (one RocksDB partition each) and DIR/manifest.json;\n"
    "serve writes ROOT/gen-NNNNNN generations, announces them over ZeroMQ and serves their files.";

void add_build_flags(warp::Flags& flags) {
  flags.value("input", "", "input file or directory (repeatable)", true)
      .value("partitions", "1", "number of document partitions")
      .value("codec", "bp128", "posting codec: bp128, bp256, vbyte, pfor-ding, pfor-block, rice")
      .value("stopwords", "none", "stop-word list: none or english")
      .boolean("no-stem", "do not stem (Porter2 is on by default)")
      .boolean("no-store", "keep no stored documents (no fetch of sources, snippets or GET of a document)")
      .boolean("no-positions", "keep no word positions (no \"phrase\" queries; a smaller index, a faster build)")
      .value("keyword-fields", "", "JSON fields kept as keyword columns for filters and facets (comma-separated)")
      .value("numeric-fields", "", "JSON fields kept as numeric columns for filters and facets (comma-separated)")
      .value("max-token-bytes", "64", "drop tokens longer than this")
      .value("bm25-k1", "1.2", "BM25 k1 for the stored block maxima")
      .value("bm25-b", "0.75", "BM25 b for the stored block maxima")
      .value("bm25-k3", "inf", "BM25 k3, query-term saturation (0: repeats count once, inf: linear)")
      .value("threads", "0",
             "threads at work in each phase: parsers (plus indexer threads), then the back end (0: one per core)")
      .value("parsers", "0", "reader/parser threads (0: --threads less the indexer threads)")
      .value("indexers", "0", "indexer threads owning the collections (0: none, each parser indexes its own chunks)")
      .value("split-mb", "0",
             "MiB per split of a large uncompressed JSONL or TREC file, read in parallel (0: input/4 per parser, 1-64)")
      .value("memory-budget", "2048", "MiB for the whole build: runs spill to disk past it")
      .value("gpu-indexers", "0", "GPU indexer threads besides the CPU indexers (0: none; needs a CUDA GPU)")
      .value("gpu-device", "0", "the CUDA device of the GPU indexers")
      .value("gpu-speed", "0", "collections a GPU indexer takes, in CPU indexers' shares (0: measured on a sample)")
      .value("gpu-hash-bits", "64", "testing only: hash bits of the GPU indexers (fewer: collisions, CPU fallback)")
      .boolean("gpu-analysis",
               "the parsers' tokenizing and stem lookups on the GPU (--gpu-device; not with --stopwords english)")
      .value("gpu-analysis-min-mb", "64",
             "MiB of input a parser below which --gpu-analysis leaves the GPU unused (its start-up costs more)");
}

void read_build_flags(const warp::Flags& flags, warp::BuildOptions& build, warp::pipeline::PipelineOptions& pipeline) {
  if (flags.all("input").empty()) throw warp::Error("--input is required\n" + flags.help_text());
  const std::string stop = flags.get("stopwords");
  if (stop != "none" && stop != "english") throw warp::Error("--stopwords must be none or english");
  build.partitions = static_cast<uint32_t>(flags.count("partitions"));
  build.codec = flags.get("codec");
  build.analyzer.remove_stopwords = stop == "english";
  build.analyzer.stem = !flags.is_set("no-stem");
  build.store = !flags.is_set("no-store");
  build.positions = !flags.is_set("no-positions");
  build.columns = warp::parse_column_schema(flags.get("keyword-fields"), flags.get("numeric-fields"));
  build.analyzer.max_token_bytes = flags.count("max-token-bytes");
  build.bm25 = {static_cast<float>(flags.number("bm25-k1")), static_cast<float>(flags.number("bm25-b")),
                static_cast<float>(flags.number("bm25-k3"))};
  warp::check_bm25_params(build.bm25);
  pipeline.threads = flags.count("threads");
  pipeline.parsers = flags.count("parsers");
  pipeline.indexers = flags.count("indexers");
  pipeline.split_bytes = flags.count("split-mb") << 20;
  pipeline.memory_budget = flags.count("memory-budget") << 20;
  pipeline.gpu_indexers = flags.count("gpu-indexers");
  pipeline.gpu_device = static_cast<int>(flags.count("gpu-device"));
  pipeline.gpu_speed = flags.number("gpu-speed");
  pipeline.gpu_hash_bits = static_cast<unsigned>(flags.count("gpu-hash-bits"));
  pipeline.gpu_analysis = flags.is_set("gpu-analysis");
  pipeline.gpu_analysis_min_bytes = flags.count("gpu-analysis-min-mb") << 20;
}

int build(int argc, char** argv) {
  warp::Flags flags(kUsage);
  add_build_flags(flags);
  flags.value("out", "", "output index directory (must not exist)")
      .value("generation", "1", "generation number written into every partition")
      .boolean("quiet", "no progress lines");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  warp::BuildCommandOptions options;
  read_build_flags(flags, options.build, options.pipeline);
  if (flags.get("out").empty()) throw warp::Error("--out is required\n" + flags.help_text());
  options.inputs = flags.all("input");
  options.out_dir = flags.get("out");
  options.build.generation = flags.count("generation");
  options.progress = !flags.is_set("quiet");
  return warp::run_build_command(options);
}

int serve(int argc, char** argv) {
  warp::Flags flags(kUsage);
  add_build_flags(flags);
  flags.value("root", "", "directory of the generations (gen-NNNNNN)")
      .value("publish", "tcp://127.0.0.1:5601", "ZeroMQ PUB endpoint for announcements")
      .value("fetch", "tcp://127.0.0.1:5602", "ZeroMQ ROUTER endpoint serving the files")
      .value("metrics", "", "HTTP address for /metrics, /healthz and /readyz, e.g. 127.0.0.1:9101")
      .value("rescan", "10", "seconds between checks of the inputs for changes")
      .boolean("once", "publish at most one new generation, then only serve")
      .value("curve-keys", "", "CurveZMQ: a directory with indexer.key and the allowed leaf*.pub (warp-indexer keys)")
      .value("write", "",
             "ZeroMQ ROUTER endpoint taking documents put and deleted through the brokers' API (e.g. "
             "tcp://127.0.0.1:5603), durable in ROOT/writes.log before they are acknowledged; empty: none")
      .value("tail", "",
             "with --write: serve the write log to leaves on this ZeroMQ endpoint (e.g. tcp://127.0.0.1:5604), each "
             "write with the collection's statistics after it, so that leaves with --tail search it before the next "
             "generation; empty: none")
      .value("tail-threads", "0",
             "with --tail: threads analyzing the written documents (their statistics are applied in order on one); "
             "0: a quarter of the cores, 1 to 8")
      .value("fold-max-writes", "100000",
             "with --write: a new generation as soon as this many writes wait, whatever --fold-interval-ms says")
      .value("fold-interval-ms", "1000", "with --write: a new generation holding the writes at most this often")
      .value("build-nice", "10",
             "builds (folds of the writes, changed inputs) run this much nicer than the sockets, the write log and "
             "its tail (0..19), so that on a shared host they yield to searches and writes")
      .value("max-apply-lag", "100000",
             "with --tail: refuse writes (the broker answers 429) while a tailing leaf has applied more than this "
             "many fewer writes than the log holds; 0: never")
      .value("signing-key", "",
             "sign every generation's manifest with this key (generation-signing.key, warp-indexer signing-key); "
             "empty: unsigned, taken only by leaves run with --unsigned-generations");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  warp::ServeOptions options;
  read_build_flags(flags, options.build, options.pipeline);
  if (flags.get("root").empty()) throw warp::Error("--root is required\n" + flags.help_text());
  options.inputs = flags.all("input");
  options.root = flags.get("root");
  options.publish_endpoint = flags.get("publish");
  options.fetch_endpoint = flags.get("fetch");
  options.metrics_address = flags.get("metrics");
  options.rescan_seconds = flags.number("rescan");
  options.once = flags.is_set("once");
  options.curve_keys = flags.get("curve-keys");
  options.signing_key = flags.get("signing-key");
  options.write_endpoint = flags.get("write");
  options.tail_endpoint = flags.get("tail");
  if (!options.tail_endpoint.empty() && options.write_endpoint.empty()) throw warp::Error("--tail needs --write");
  options.tail_threads = flags.count("tail-threads");
  options.fold_interval_ms = flags.count("fold-interval-ms");
  options.fold_max_writes = flags.count("fold-max-writes");
  options.max_apply_lag = flags.count("max-apply-lag");
  options.build_nice = static_cast<int>(flags.count("build-nice"));
  if (options.build_nice > 19) throw warp::Error("--build-nice must be 0..19");
  return warp::run_serve_command(options);
}

int fetch(int argc, char** argv) {
  warp::Flags flags(kUsage);
  flags.value("from", "tcp://127.0.0.1:5601", "the indexer's announcement endpoint")
      .value("root", "", "directory to place gen-NNNNNN in")
      .value("timeout", "30", "seconds to wait for an announcement")
      .value("curve-keys", "", "CurveZMQ: a directory with leaf.key and indexer.pub")
      .value("generation-key", "",
             "the indexer's public signing key (generation-signing.pub): the manifest must verify")
      .boolean("unsigned-generations", "without --generation-key: take a generation whose manifest is not signed");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  if (flags.get("root").empty()) throw warp::Error("--root is required\n" + flags.help_text());
  return warp::run_fetch_command({.from = flags.get("from"),
                                  .root = flags.get("root"),
                                  .timeout_seconds = flags.number("timeout"),
                                  .curve_keys = flags.get("curve-keys"),
                                  .generation_key = flags.get("generation-key"),
                                  .unsigned_generations = flags.is_set("unsigned-generations")});
}

// The Ed25519 pair generations are signed with (common/transfer/generation_manifest.hpp).
int signing_key(int argc, char** argv) {
  warp::Flags flags(kUsage);
  flags.value("out", "", "directory for generation-signing.key (secret, mode 0600) and generation-signing.pub");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  if (flags.get("out").empty()) throw warp::Error("--out is required\n" + flags.help_text());
  warp::transfer::write_signing_key_pair(flags.get("out"), warp::transfer::generate_signing_key_pair());
  std::printf("%s/generation-signing.key and generation-signing.pub\n", flags.get("out").c_str());
  return 0;
}

// CurveZMQ key pairs for the services (common/transfer/curve.hpp): ROLE.key and ROLE.pub per role.
int keys(int argc, char** argv) {
  warp::Flags flags(kUsage);
  flags.value("out", "", "directory for the key files (created)")
      .value("roles", "indexer,leaf,broker", "a key pair for each, as ROLE.key (secret, mode 0600) and ROLE.pub");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) return std::printf("%s", flags.help_text().c_str()), 0;
  if (flags.get("out").empty()) throw warp::Error("--out is required\n" + flags.help_text());
  const std::string roles = flags.get("roles");
  for (size_t start = 0, end; start < roles.size(); start = end + 1) {
    end = roles.find(',', start);
    if (end == std::string::npos) end = roles.size();
    const std::string role = roles.substr(start, end - start);
    if (role.empty() || role.find('/') != std::string::npos)
      throw warp::Error("--roles: a bad role name '" + role + "'");
    warp::transfer::write_curve_key_pair(flags.get("out"), role, warp::transfer::generate_curve_key_pair());
    std::printf("%s/%s.key and %s.pub\n", flags.get("out").c_str(), role.c_str(), role.c_str());
  }
  return 0;
}

// The content of every partition of an index (or of one partition): equal lines, equal rows.
int digest(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]).rfind("--", 0) == 0) {
    std::printf(
        "usage: warp-indexer digest DIR\n  one line per partition and column family: rows, bytes and a CRC-32 of every "
        "key and value\n");
    return argc == 3 ? 0 : 2;
  }
  const std::filesystem::path dir = argv[2];
  std::vector<std::filesystem::path> partitions;
  if (std::filesystem::exists(dir / "CURRENT")) {
    partitions.push_back(dir);
  } else {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_directory() && std::filesystem::exists(entry.path() / "CURRENT")) partitions.push_back(entry.path());
    }
    std::sort(partitions.begin(), partitions.end());
  }
  if (partitions.empty()) throw warp::Error(dir.string() + ": no partition found");
  for (const auto& partition : partitions) {
    for (const std::string& line : warp::partition_digest(partition.string())) {
      std::printf("%s %s\n", partition.filename().c_str(), line.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "build") return build(argc, argv);
    if (command == "serve") return serve(argc, argv);
    if (command == "fetch") return fetch(argc, argv);
    if (command == "keys") return keys(argc, argv);
    if (command == "signing-key") return signing_key(argc, argv);
    if (command == "digest") return digest(argc, argv);
    if (command == "--help" || command == "-h" || command == "help") {
      std::printf("%s\n\nCommands (each has --help): build, serve, fetch, keys, signing-key, digest\n", kUsage);
      return 0;
    }
    std::fprintf(stderr, "%s\n\nunknown command '%s' (try: warp-indexer --help)\n", kUsage, command.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warp-indexer: %s\n", e.what());
    return 1;
  }
}
