// One JSONL input built both ways, by the in-memory builder and by the indexer's pipeline (two
// parsers, small splits), for the tests that compare their partitions row for row.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"
#include "common/index/index_files.hpp"
#include "indexer/pipeline/parallel_builder.hpp"
#include "indexer/reader/document_reader.hpp"

namespace warp::testing {

struct BothBuilds {
  std::vector<BuiltPartition> built;       // the in-memory builder's partitions
  std::filesystem::path reference, piped;  // the builder's written to disk, and the pipeline's
};

// Into dir/reference-TAG and dir/pipeline-TAG (spilling under dir/runs).
inline BothBuilds build_both_ways(const std::string& input, const BuildOptions& build, const std::filesystem::path& dir,
                                  const std::string& tag) {
  BothBuilds out;
  ReadReport report;
  IndexBuilder builder(build);
  for (const auto& doc : read_documents({input}, report)) builder.add_document(doc);
  out.built = builder.build();
  out.reference = dir / ("reference-" + tag);
  write_index(out.built, out.reference.string());
  pipeline::PipelineOptions options;
  options.build = build;
  options.parsers = 2;
  options.split_bytes = 64 << 10;
  options.spill_dir = (dir / "runs").string();
  ReadReport read;
  out.piped = dir / ("pipeline-" + tag);
  pipeline::build_index({input}, options, out.piped.string(), read);
  return out;
}

}  // namespace warp::testing
