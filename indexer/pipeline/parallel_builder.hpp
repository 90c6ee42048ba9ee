// The parallel parser/indexer pipeline of Wei & JaJa 2010, on CPU threads (the GPU indexers of the
// paper are a later issue; IndexerThread is the seam where they plug in):
//   reader ──batches──▶ M parsers ──per-indexer pieces──▶ N indexers ──runs──▶ merge ──▶ partitions
// - The reader assigns global docIDs in input order and resolves duplicate ids (the last wins; the
//   replaced document is dropped and the docIDs renumbered at the end).
// - Parsers analyze documents with the common analyzer and regroup their terms by trie collection
//   (trie_collections.hpp); each collection belongs to one indexer, assigned by sampling the first
//   documents so that the token counts of the indexers balance (popular collections spread out).
// - Indexers hold each collection's dictionary as a B-tree (term_btree.hpp) and append postings;
//   past their share of the memory budget they write their postings as a run file and start over.
// - At the end the runs are merged per term and the partitions built exactly as IndexBuilder does.
// Queues are bounded and indexers spill runs past their share of the budget, so reading and
// parsing hold bounded memory; the final merge and partition build still hold the generation's
// postings in memory (out-of-core merging into partition writers is later work).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"
#include "indexer/document_reader.hpp"

namespace warp::pipeline {

struct PipelineOptions {
  BuildOptions build;
  size_t parsers = 0;                       // 0: one per core
  size_t indexers = 0;                      // 0: half the cores, at least one
  size_t batch_documents = 1000;
  size_t queue_depth = 4;                   // batches waiting per queue
  uint64_t memory_budget = 2ull << 30;      // bytes of postings held by all indexers before runs spill
  std::string spill_dir;                    // where run files go (created, removed at the end)
};

struct PipelineProgress {
  uint64_t documents = 0;
  uint64_t bytes = 0;
  uint64_t total_bytes = 0;  // input files on disk, for an ETA
  uint64_t runs_written = 0;
};

struct PipelineReport {
  uint64_t documents = 0;
  uint64_t runs_written = 0;
  uint64_t runs_merged = 0;
  size_t parsers = 0, indexers = 0;
  double parse_seconds = 0;  // reading, parsing and indexing, until the last batch is in
  double merge_seconds = 0;  // run merge and docID renumbering
  double encode_seconds = 0; // statistics, block maxima and encoding of the partitions
};

std::vector<BuiltPartition> build_with_pipeline(DocumentStream& input, const PipelineOptions& options,
                                                PipelineReport& report,
                                                const std::function<void(const PipelineProgress&)>& on_progress = {});

}  // namespace warp::pipeline
