// warp-indexer: builds Warpsearch partitions from document files.
#include <cstdio>
#include <string>

#include "common/util/flags.hpp"
#include "common/util/status.hpp"
#include "indexer/build_command.hpp"

namespace {

constexpr const char* kUsage =
    "usage: warp-indexer build --input PATH... --out DIR [--partitions P] [flags]\n"
    "\n"
    "Reads JSONL ({\"id\",\"title\",\"body\",\"url\"?} per line), TREC SGML and WARC (plain or .gz) files or\n"
    "directories of them, runs the parallel parser/indexer pipeline and writes DIR/part-NNNN (one RocksDB\n"
    "partition each) and DIR/manifest.json.";

int build(int argc, char** argv) {
  warp::Flags flags(kUsage);
  flags.value("input", "", "input file or directory (repeatable)", true)
      .value("out", "", "output index directory (must not exist)")
      .value("partitions", "1", "number of document partitions")
      .value("codec", "bp128", "posting codec: bp128, bp256, vbyte, pfor-ding, pfor-block, rice")
      .value("stopwords", "none", "stop-word list: none or english")
      .boolean("no-stem", "do not stem (Porter2 is on by default)")
      .value("max-token-bytes", "64", "drop tokens longer than this")
      .value("generation", "1", "generation number written into every partition")
      .value("bm25-k1", "0.9", "BM25 k1 for the stored block maxima")
      .value("bm25-b", "0.4", "BM25 b for the stored block maxima")
      .value("parsers", "0", "parser threads (0: one per core)")
      .value("indexers", "0", "indexer threads (0: half the cores)")
      .value("batch", "1000", "documents per parser batch")
      .value("memory-budget", "2048", "MiB of postings held before indexers spill run files")
      .boolean("quiet", "no progress lines");
  flags.parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.help_text().c_str());
    return 0;
  }
  if (flags.all("input").empty() || flags.get("out").empty()) throw warp::Error("--input and --out are required\n" + flags.help_text());
  const std::string stop = flags.get("stopwords");
  if (stop != "none" && stop != "english") throw warp::Error("--stopwords must be none or english");

  warp::BuildCommandOptions options;
  options.inputs = flags.all("input");
  options.out_dir = flags.get("out");
  options.build.partitions = static_cast<uint32_t>(flags.count("partitions"));
  options.build.codec = flags.get("codec");
  options.build.analyzer.remove_stopwords = stop == "english";
  options.build.analyzer.stem = !flags.is_set("no-stem");
  options.build.analyzer.max_token_bytes = flags.count("max-token-bytes");
  options.build.generation = flags.count("generation");
  options.build.bm25 = {static_cast<float>(flags.number("bm25-k1")), static_cast<float>(flags.number("bm25-b"))};
  options.progress = !flags.is_set("quiet");
  options.pipeline.parsers = flags.count("parsers");
  options.pipeline.indexers = flags.count("indexers");
  options.pipeline.batch_documents = std::max<uint64_t>(1, flags.count("batch"));
  options.pipeline.memory_budget = flags.count("memory-budget") << 20;
  return warp::run_build_command(options);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "build") return build(argc, argv);
    if (command == "--help" || command == "-h" || command == "help") {
      std::printf("%s\n\nCommands:\n  build    build partitions from documents (warp-indexer build --help)\n", kUsage);
      return 0;
    }
    std::fprintf(stderr, "%s\n\nunknown command '%s' (try: warp-indexer build --help)\n", kUsage, command.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warp-indexer: %s\n", e.what());
    return 1;
  }
}
