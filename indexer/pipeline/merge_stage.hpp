// The merge stage of a build (the back end): the final docIDs (DocTable::finish), then the term
// space cut into ranges of about equal run bytes, each range a k-way merge of every run that maps
// provisional to final docIDs, encodes each term's list per partition (PartitionEncoder) and
// streams it into that partition's SST files, moved into the partition at once (long lists to
// blob files: PartitionAssembly) while the other ranges are merged; beside them, each partition's
// documents from the spill.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"
#include "common/index/partition_store.hpp"
#include "indexer/pipeline/build_plan.hpp"
#include "indexer/pipeline/doc_table.hpp"
#include "indexer/pipeline/parse_stage.hpp"

namespace warp::pipeline {

// One term range's SST files and counts, by partition.
struct RangeOutput {
  std::vector<SstRows::Done> lexicon, postings;
  std::vector<uint64_t> terms, posting_count, list_bytes;
};

struct MergeOutput {
  std::vector<DocId> bounds;               // partition p holds final docIDs [bounds[p], bounds[p + 1])
  std::vector<PartitionEncoder> encoders;  // by partition: its meta and document lengths
  std::vector<RangeOutput> ranges;         // in term order
  // By partition, its slices' files in docID order: the documents' records, and their stored forms.
  std::vector<std::vector<SstRows::Done>> documents, stored;
  std::vector<std::vector<ColumnsBuilder>> columns;  // by partition, by slice: with declared fields
  // By partition, its word positions' chunks (position_chunk_begins) and their files, in docID order.
  std::vector<std::vector<DocId>> position_chunks;
  std::vector<std::vector<SstRows::Done>> positions;
  std::vector<std::unique_ptr<PartitionAssembly>> assemblies;  // by partition: the files moved in so far
};

// Into the (created, empty) `partition_dirs`. Fills report.documents, merge_seconds and
// encode_seconds; with no document kept, returns no partition (empty assemblies, closed).
MergeOutput merge_runs(const BuildPlan& plan, const PipelineOptions& options, DocTable& docs, const ParseOutput& parsed,
                       const std::vector<std::string>& partition_dirs, ReadReport& read, PipelineReport& report);

}  // namespace warp::pipeline
