// The parallel, out-of-core parser/indexer pipeline of Wei & JaJa 2010 (indexers.hpp: CPU and GPU
// indexers):
//
//   splits ──▶ T reader/parsers ──pieces by trie collection──▶ indexers ──sorted runs──▶ disk
//                    │ documents, chunk by chunk                                            │
//                    ▼                                                                      ▼
//               DocTable (spill file, 16 B/document) ──final docIDs──▶ back end: term ranges merged
//                                                                   and written in parallel, one
//                                                                   SST file per range, family and
//                                                                   partition, then ingested
// build_index drives four stages, each in a file of its own: plan (build_plan.hpp: threads, the
// memory budget, splits), parse (parse_stage.hpp, parser.hpp: runs on disk, documents spilled),
// merge (merge_stage.hpp: final docIDs, term ranges merged and encoded into each partition's SST
// files) and assemble (assemble_stage.hpp: meta rows, documents, seal, manifest).
// - Input is cut into splits (plan_splits: byte ranges of large uncompressed JSONL and TREC files,
//   whole gzip and WARC files); every reader/parser thread reads its own splits (a contiguous range
//   of them first: final_order.hpp), parses and analyzes them chunk by chunk and regroups each
//   chunk's postings by trie collection (trie_collections.hpp).
// - Indexers: by default every parser indexes its own chunks' CPU collections with an indexer of
//   its own (no hand-over, fed the analyzer's stem ids: ParserIndexer); with `indexers` > 0, indexer threads own the
//   collections (assigned by sampling the first chunk so that their token counts balance) and parsers feed them through
//   bounded queues. GPU indexers always own their collections, in proportion to their measured speed.
// - Documents get provisional ids as chunks are read; DocTable turns them into final docIDs in
//   input order (duplicates: the last wins), so the output is the same for any thread count.
// - Indexers keep each collection's dictionary as a B-tree (term_btree.hpp) and append postings;
//   past their share of the memory budget they write a sorted run and empty their postings (the
//   dictionary too once it takes half the share), and write the rest as a last run at the end.
// - The back end splits the term space into ranges of about equal run bytes; each range is a
//   k-way merge of every run, which maps provisional to final docIDs, encodes each term's list
//   per partition (PartitionEncoder, the in-memory builder's encoder) and streams it into that
//   partition's SST files, and moves them into the partition at once (long lists to blob files:
//   PartitionAssembly), overlapping the other ranges' work. Documents stream from the spill file.
//   Then every partition gets its meta rows and documents and is sealed.
// Memory: `memory_budget` bounds the whole build (in-flight chunks, indexers' postings and
// dictionaries, per-document arrays, merge buffers); see docs/architecture.md, "The indexing pipeline".
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "indexer/pipeline/pipeline_options.hpp"
#include "indexer/reader/document_reader.hpp"

namespace warp::pipeline {

// How many term ranges the back end merges at once (at least 1, at most `threads`): each reads
// every run through a buffer of kMinMergeBuffer or more, all of them within a quarter of `budget`,
// and holds a descriptor per run, all of them kFilesSpared below `open_files` (the process's
// limit). With many runs (small budgets, or a low limit) fewer merge at once: 16 merges of 863
// runs had failed with "cannot open run file", and their buffers had outgrown the budget.
inline constexpr uint64_t kMinMergeBuffer = 16u << 10;
inline constexpr uint64_t kFilesSpared = 256;
size_t merge_concurrency(uint64_t budget, uint64_t runs, size_t threads, uint64_t open_files);

// Builds a generation from the inputs (files and directories) into the index directory `out_dir`
// (partitions and manifest; refused if it holds a manifest already). `read` gets the input's
// counts and the first 100 malformed records. No partition is written when there is no document.
PipelineReport build_index(const std::vector<std::string>& inputs, const PipelineOptions& options,
                           const std::string& out_dir, ReadReport& read,
                           const std::function<void(const PipelineProgress&)>& on_progress = {});

}  // namespace warp::pipeline
