// What a parser hands an indexer: postings of one chunk regrouped by the indexer's trie collections
// (trie_collections.hpp). Plain data, shared with the GPU inverter.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace warp::pipeline {

// One parser's postings of one chunk for one indexer, with their term's collection and suffix.
// Docs are provisional ids.
struct PieceEntry {
  uint32_t collection, suffix_offset, suffix_size;  // the suffix: bytes of Piece::suffixes
  uint32_t doc, freq;
};
struct Piece {
  std::string suffixes;  // concatenated
  std::vector<PieceEntry> entries;
};

}  // namespace warp::pipeline
