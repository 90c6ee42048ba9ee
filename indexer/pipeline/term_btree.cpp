#include "indexer/pipeline/term_btree.hpp"

#include <cstring>

#include "indexer/postings/trie_collections.hpp"

namespace warp::pipeline {

uint32_t TermForest::cache_of(std::string_view s) {
  uint32_t cache = 0;
  for (size_t i = 0; i < 4; ++i) cache = (cache << 8) | (i < s.size() ? static_cast<unsigned char>(s[i]) : 0);
  return cache;
}

int TermForest::compare(const Key& key, uint32_t cache, std::string_view suffix) const {
  if (key.cache != cache) return key.cache < cache ? -1 : 1;
  const int c = this->suffix(key.id).compare(suffix);  // tie on the cache: compare the whole strings
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

void TermForest::split_child(uint32_t parent, int index) {
  const uint32_t full = nodes_[parent].children[index];
  nodes_.emplace_back();
  const uint32_t right = static_cast<uint32_t>(nodes_.size() - 1);
  Node& left_node = nodes_[full];
  Node& right_node = nodes_[right];
  constexpr int t = (kMaxKeys + 1) / 2;  // 16
  right_node.leaf = left_node.leaf;
  right_node.count = t - 1;
  for (int j = 0; j < t - 1; ++j) right_node.keys[j] = left_node.keys[j + t];
  if (!left_node.leaf) {
    for (int j = 0; j < t; ++j) right_node.children[j] = left_node.children[j + t];
  }
  left_node.count = t - 1;
  Node& p = nodes_[parent];
  for (int j = p.count; j > index; --j) p.children[j + 1] = p.children[j];
  p.children[index + 1] = right;
  for (int j = p.count - 1; j >= index; --j) p.keys[j + 1] = p.keys[j];
  p.keys[index] = left_node.keys[t - 1];
  ++p.count;
}

void TermForest::clear() {
  nodes_.clear();
  suffix_bytes_.clear();
  suffix_ends_.clear();
  roots_.clear();
}

uint32_t TermForest::find_or_insert(uint32_t collection, std::string_view suffix) {
  if (roots_.empty()) roots_.assign(kTrieCollections, kNone);
  const uint32_t cache = cache_of(suffix);
  uint32_t& root = roots_[collection];
  if (root == kNone) {
    nodes_.emplace_back();
    root = static_cast<uint32_t>(nodes_.size() - 1);
  }
  // Search first: most terms of a batch are already known.
  for (uint32_t node = root;;) {
    const Node& n = nodes_[node];
    int i = 0;
    int c = -1;
    while (i < n.count && (c = compare(n.keys[i], cache, suffix)) < 0) ++i;
    if (i < n.count && c == 0) return n.keys[i].id;
    if (n.leaf) break;
    node = n.children[i];
  }
  const uint32_t id = static_cast<uint32_t>(suffix_ends_.size());
  suffix_bytes_.append(suffix);
  suffix_ends_.push_back(static_cast<uint32_t>(suffix_bytes_.size()));
  if (nodes_[root].count == kMaxKeys) {  // grow: a new root above the full one
    nodes_.emplace_back();
    const uint32_t new_root = static_cast<uint32_t>(nodes_.size() - 1);
    nodes_[new_root].leaf = false;
    nodes_[new_root].children[0] = root;
    root = new_root;
    split_child(new_root, 0);
  }
  for (uint32_t node = root;;) {  // descend, splitting full children before entering them
    Node* n = &nodes_[node];
    int i = n->count - 1;
    if (n->leaf) {
      while (i >= 0 && compare(n->keys[i], cache, suffix) > 0) {
        n->keys[i + 1] = n->keys[i];
        --i;
      }
      n->keys[i + 1] = {cache, id};
      ++n->count;
      return id;
    }
    while (i >= 0 && compare(n->keys[i], cache, suffix) > 0) --i;
    ++i;
    if (nodes_[n->children[i]].count == kMaxKeys) {
      split_child(node, i);
      n = &nodes_[node];  // the pool may have moved
      if (compare(n->keys[i], cache, suffix) < 0) ++i;
    }
    node = n->children[i];
  }
}

void TermForest::walk(uint32_t node, std::vector<uint32_t>& out) const {
  const Node& n = nodes_[node];
  for (int i = 0; i < n.count; ++i) {
    if (!n.leaf) walk(n.children[i], out);
    out.push_back(n.keys[i].id);
  }
  if (!n.leaf) walk(n.children[n.count], out);
}

void TermForest::in_order(uint32_t collection, std::vector<uint32_t>& out) const {
  if (roots_.empty() || roots_[collection] == kNone) return;
  walk(roots_[collection], out);
}

// The collections in term order: terms starting with a digit (one collection per digit) or a
// letter (the 676 three-letter collections of that letter, merged with the letter's collection of
// short terms and terms with a non-letter among their first three bytes) take contiguous ranges of
// the byte order; the collection of everything else holds terms whose first byte sorts before the
// digits, between the digits and the letters, or after the letters, in three runs.
void TermForest::in_term_order(std::vector<uint32_t>& out) const {
  out.clear();
  if (roots_.empty()) return;
  std::vector<uint32_t> others, short_terms, merged;
  in_order(kTrieCollections - 1, others);
  const auto first_byte = [&](uint32_t id) {
    const std::string_view s = suffix(id);
    return s.empty() ? -1 : static_cast<int>(static_cast<unsigned char>(s[0]));
  };
  size_t other = 0;
  const auto others_before = [&](int byte) {
    while (other < others.size() && first_byte(others[other]) < byte) out.push_back(others[other++]);
  };
  others_before('0');
  for (uint32_t digit = 0; digit < 10; ++digit) in_order(17576 + digit, out);
  others_before('a');
  std::string term;
  for (uint32_t letter = 0; letter < 26; ++letter) {
    short_terms.clear();
    in_order(17586 + letter, short_terms);
    size_t next_short = 0;
    for (uint32_t collection = letter * 676; collection < (letter + 1) * 676; ++collection) {
      if (roots_[collection] == kNone) continue;
      const size_t from = out.size();
      in_order(collection, out);
      if (next_short == short_terms.size()) continue;
      // Short terms that sort before some of this collection's terms go in between.
      merged.clear();
      for (size_t i = from; i < out.size(); ++i) {
        term = collection_prefix(collection);
        term += suffix(out[i]);
        while (next_short < short_terms.size() && suffix(short_terms[next_short]) < std::string_view(term)) {
          merged.push_back(short_terms[next_short++]);
        }
        merged.push_back(out[i]);
      }
      out.resize(from);
      out.insert(out.end(), merged.begin(), merged.end());
    }
    out.insert(out.end(), short_terms.begin() + static_cast<std::ptrdiff_t>(next_short), short_terms.end());
  }
  others_before(256);
}

}  // namespace warp::pipeline
