// Which indexer owns which trie collections (Wei & JaJa 2010 §III.C): the first chunk of the input
// is analyzed as a sample, its token counts per collection balance the indexers' loads, and where
// GPU indexers take part the sample also measures how many CPU indexers' worth one GPU indexer is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "indexer/pipeline/indexers.hpp"
#include "indexer/postings/piece.hpp"
#include "indexer/reader/document_reader.hpp"

namespace warp::pipeline {

// Collections to indexers by sampled token counts, heaviest first onto the indexer with the least
// load for its speed (`speed`: 1 for a CPU indexer, the measured ratio for a GPU indexer).
std::vector<uint32_t> assign_collections(const std::vector<uint64_t>& tokens, const std::vector<double>& speed);

// The first `bytes` of the input, analyzed: token counts per collection, and (when `postings` is
// given) its postings as one piece, docs numbered from 0.
std::vector<uint64_t> sample_tokens(const std::vector<InputSplit>& splits, uint64_t bytes, const AnalyzerConfig& config,
                                    Piece* postings = nullptr);

// How many CPU indexers' worth of postings one GPU indexer takes: both index the sample (the GPU
// warmed up first), the ratio of their times, within [0.5, 64].
double measure_gpu_speed(const Piece& sample, const std::string& spill_dir, Indexer& gpu_indexer);

}  // namespace warp::pipeline
