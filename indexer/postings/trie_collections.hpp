// The fixed trie table of Wei & JaJa 2010 (Table I): terms are grouped into collections by their
// first three letters (26^3 = 17,576), plus one collection per leading digit (10), one per first
// letter of terms shorter than three letters or with a non-letter among the first three (26), and
// one for everything else (1): 17,613 collections. Each collection's dictionary is a small B-tree
// owned by one indexer thread, keyed by the term without its three-letter prefix.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace warp::pipeline {

inline constexpr uint32_t kTrieCollections = 26 * 26 * 26 + 10 + 26 + 1;

inline uint32_t trie_collection(std::string_view term) {
  const auto letter = [](char c) { return c >= 'a' && c <= 'z'; };
  if (term.size() >= 3 && letter(term[0]) && letter(term[1]) && letter(term[2])) {
    return (term[0] - 'a') * 676 + (term[1] - 'a') * 26 + (term[2] - 'a');
  }
  if (!term.empty() && term[0] >= '0' && term[0] <= '9') return 17576 + (term[0] - '0');
  if (!term.empty() && letter(term[0])) return 17586 + (term[0] - 'a');
  return kTrieCollections - 1;
}

// The part of the term the collection's B-tree stores: the three-letter prefix is implied.
inline std::string_view trie_suffix(std::string_view term, uint32_t collection) {
  return collection < 17576 ? term.substr(3) : term;
}

// What trie_suffix drops: the collection's three letters (empty for the other collections).
inline std::string collection_prefix(uint32_t collection) {
  if (collection >= 17576) return {};
  return {static_cast<char>('a' + collection / 676), static_cast<char>('a' + collection / 26 % 26),
          static_cast<char>('a' + collection % 26)};
}

}  // namespace warp::pipeline
