#include "indexer/pipeline/assemble_stage.hpp"

#include <chrono>

#include "common/index/index_files.hpp"
#include "common/util/parallel_tasks.hpp"

namespace warp::pipeline {

void assemble_partitions(const BuildPlan& plan, const DocTable& docs, MergeOutput& merged, const std::string& out_dir,
                         PipelineReport& report) {
  const auto start = std::chrono::steady_clock::now();
  const size_t parts = merged.encoders.size();
  report.partitions.resize(parts);
  run_parallel_tasks(parts, plan.threads, [&](size_t p) {
    BuiltSummary& summary = report.partitions[p];
    summary.meta = merged.encoders[p].meta();
    std::vector<SstRows::Done> lexicon;
    for (const RangeOutput& range : merged.ranges) {
      lexicon.push_back(range.lexicon[p]);
      summary.terms += range.terms[p];
      summary.meta.posting_count += range.posting_count[p];
      summary.list_bytes += range.list_bytes[p];
    }
    const std::vector<uint32_t> lengths(docs.lengths().begin() + merged.bounds[p],
                                        docs.lengths().begin() + merged.bounds[p + 1]);
    std::string columns;  // the slices' columns joined in docID order
    if (!merged.columns.empty()) {
      ColumnsBuilder joined = merged.columns[p].front();
      for (size_t slice = 1; slice < merged.columns[p].size(); ++slice) joined.append(merged.columns[p][slice]);
      columns = joined.build().serialize();
    }
    PartitionExtras extra{merged.stored[p], columns, {}, {}};
    if (!merged.positions.empty())
      extra.positions = merged.positions[p], extra.position_chunks = merged.position_chunks[p];
    merged.assemblies[p]->finish(summary.meta, summary.terms, lengths, lexicon, merged.documents[p], extra);
    merged.assemblies[p].reset();
  });
  std::vector<ManifestPartition> manifest;
  for (const BuiltSummary& summary : report.partitions) manifest.push_back({summary.meta, summary.terms});
  write_manifest(out_dir, manifest);
  report.write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace warp::pipeline
