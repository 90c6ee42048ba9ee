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

namespace warp::pipeline {

class TermForest {
 public:
  static constexpr int kMaxKeys = 31;

  // The id of `suffix` in the tree of `collection`, inserting it (with the next id) if absent.
  uint32_t find_or_insert(uint32_t collection, std::string_view suffix);
  size_t size() const { return suffixes_.size(); }
  const std::string& suffix(uint32_t id) const { return suffixes_[id]; }
  // Term ids of one collection in suffix order.
  void in_order(uint32_t collection, std::vector<uint32_t>& out) const;

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

  std::vector<Node> nodes_;
  std::vector<std::string> suffixes_;
  std::vector<uint32_t> roots_;  // by collection; kNone when empty
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
};

}  // namespace warp::pipeline
