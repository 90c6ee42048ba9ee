// The assemble stage of a build: each partition gets its meta rows, document lengths and documents
// and is sealed (PartitionAssembly::finish), then the generation's manifest is written.
#pragma once
#include <string>

#include "indexer/pipeline/build_plan.hpp"
#include "indexer/pipeline/doc_table.hpp"
#include "indexer/pipeline/merge_stage.hpp"

namespace warp::pipeline {

// Fills report.partitions and write_seconds; the assemblies are closed.
void assemble_partitions(const BuildPlan& plan, const DocTable& docs, MergeOutput& merged, const std::string& out_dir,
                         PipelineReport& report);

}  // namespace warp::pipeline
