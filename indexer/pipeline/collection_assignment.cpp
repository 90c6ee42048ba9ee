#include "indexer/pipeline/collection_assignment.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string_view>

#include "indexer/postings/trie_collections.hpp"

namespace warp::pipeline {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<uint32_t> assign_collections(const std::vector<uint64_t>& tokens, const std::vector<double>& speed) {
  const size_t indexers = speed.size();
  std::vector<uint32_t> owner(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) owner[c] = c % indexers;  // unseen collections
  std::vector<uint32_t> order(kTrieCollections);
  for (uint32_t c = 0; c < kTrieCollections; ++c) order[c] = c;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return tokens[a] > tokens[b]; });
  std::vector<double> load(indexers, 0);
  for (uint32_t c : order) {
    if (tokens[c] == 0) break;
    size_t best = 0;
    for (size_t i = 1; i < indexers; ++i) {
      if ((load[i] + tokens[c]) / speed[i] < (load[best] + tokens[c]) / speed[best]) best = i;
    }
    owner[c] = static_cast<uint32_t>(best);
    load[best] += tokens[c];
  }
  return owner;
}

std::vector<uint64_t> sample_tokens(const std::vector<InputSplit>& splits, uint64_t bytes, const AnalyzerConfig& config,
                                    Piece* postings) {
  std::vector<uint64_t> tokens(kTrieCollections, 0);
  if (splits.empty()) return tokens;
  Analyzer analyzer(config);
  analyzer.limit_stem_cache(1024);
  SplitReader reader(splits.front());
  SourceDocument doc;
  std::vector<std::string> terms;
  std::map<std::string_view, uint32_t> counts;
  for (uint32_t d = 0; reader.bytes_read() < bytes && reader.next(doc); ++d) {
    terms.clear();
    analyzer.analyze(doc.title, terms);
    analyzer.analyze(doc.body, terms);
    for (const std::string& term : terms) ++tokens[trie_collection(term)];
    if (postings == nullptr) continue;
    counts.clear();
    for (const std::string& term : terms) ++counts[term];
    for (const auto& [term, freq] : counts) {
      const uint32_t collection = trie_collection(term);
      const std::string_view suffix = trie_suffix(term, collection);
      postings->entries.push_back({collection, static_cast<uint32_t>(postings->suffixes.size()),
                                   static_cast<uint32_t>(suffix.size()), d, freq});
      postings->suffixes.append(suffix);
    }
  }
  return tokens;
}

double measure_gpu_speed(const Piece& sample, const std::string& spill_dir, Indexer& gpu_indexer) {
  const auto timed = [&](Indexer& indexer, const Piece& piece) {
    const auto start = Clock::now();
    indexer.consume(piece);
    indexer.spill();
    for (const RunInfo& run : indexer.runs()) fs::remove(run.path);
    indexer.runs().clear();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const auto cpu_indexer = make_cpu_indexer({900002, spill_dir, [] { return ~uint64_t{0}; }, nullptr});
  Piece warm_up;
  warm_up.suffixes = "x";
  warm_up.entries.push_back({0, 0, 1, 0, 1});
  timed(gpu_indexer, warm_up);
  if (sample.entries.size() < 10000) return 4.0;  // too little to time: a GPU indexer counts as four
  const double gpu_seconds = timed(gpu_indexer, sample), cpu_seconds = timed(*cpu_indexer, sample);
  return std::clamp(cpu_seconds / std::max(gpu_seconds, 1e-6), 0.5, 64.0);
}

}  // namespace warp::pipeline
