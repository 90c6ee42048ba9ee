// A B-tree of minimum degree 16 (at most 31 keys and 32 children per node) mapping term suffixes
// to term ids, as in Wei & JaJa 2010 §III: each key carries a 4-byte cache of the suffix's first
// bytes, so most comparisons are one integer compare; the full string is read only on a tie.
// One tree per trie collection, all trees of an indexer thread sharing one node pool and one
// string store. Not thread-safe: one indexer thread owns it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/huge_pages.hpp"

namespace warp::pipeline {

class TermForest {
 public:
  static constexpr int kMaxKeys = 31;

  // The id of `suffix` in the tree of `collection`, inserting it (with the next id) if absent.
  uint32_t find_or_insert(uint32_t collection, std::string_view suffix);
  size_t size() const { return suffix_ends_.size(); }
  std::string_view suffix(uint32_t id) const {
    const uint32_t begin = id == 0 ? 0 : suffix_ends_[id - 1];
    return std::string_view(suffix_bytes_).substr(begin, suffix_ends_[id] - begin);
  }
  // Empty again, keeping the memory for the next terms.
  void clear();
  // Bytes held (node pool, suffixes).
  uint64_t memory_bytes() const {
    return nodes_.capacity() * sizeof(Node) + suffix_bytes_.capacity() + suffix_ends_.capacity() * 4;
  }
  // Term ids of one collection in suffix order (appended to `out`).
  void in_order(uint32_t collection, std::vector<uint32_t>& out) const;
  // Every term id in the byte order of the whole terms (the collection's three letters, then the
  // suffix; trie_collections.hpp): the collections' own orders merged where they interleave, with
  // no term built or compared outside those merges. Replaces `out`.
  void in_term_order(std::vector<uint32_t>& out) const;

 private:
  struct Key {
    uint32_t cache;  // first 4 suffix bytes, big-endian, zero-padded
    uint32_t id;
  };
  struct Node {
    uint8_t count = 0;
    bool leaf = true;
    Key keys[kMaxKeys];
    uint32_t children[kMaxKeys + 1];
  };
  static uint32_t cache_of(std::string_view s);
  int compare(const Key& key, uint32_t cache, std::string_view suffix) const;  // key vs (cache, suffix)
  void split_child(uint32_t parent, int index);
  void walk(uint32_t node, std::vector<uint32_t>& out) const;

  HugeVector<Node> nodes_;
  std::string suffix_bytes_;           // every suffix, back to back
  std::vector<uint32_t> suffix_ends_;  // by id
  std::vector<uint32_t> roots_;        // by collection; kNone when empty
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
};

}  // namespace warp::pipeline
