#include "leaf/query/query_constraints.hpp"

#include <algorithm>
#include <iterator>
#include <memory>

#include "common/query/filter.hpp"
#include "leaf/query/phrase_docs.hpp"

namespace warp {
std::vector<DocId> holding_all(const std::vector<std::string>& terms, const IndexView& index, CursorStats* stats) {
  std::vector<std::unique_ptr<PostingCursor>> cursors;
  for (const std::string& term : terms) {
    const TermInfo* info = index.find(term);
    if (info == nullptr) return {};
    // Only docIDs are read: no norms, no scoring.
    cursors.push_back(
        std::make_unique<PostingCursor>(index.list(term, *info), nullptr, index.meta.doc_begin, TermScoring{}, stats));
  }
  std::vector<DocId> docs;
  if (cursors.empty()) return docs;
  std::sort(cursors.begin(), cursors.end(), [](const auto& a, const auto& b) { return a->size() < b->size(); });
  for (DocId candidate = cursors[0]->docid(); candidate != kEndDoc;) {
    bool all = true;
    for (size_t i = 1; i < cursors.size() && all; ++i) {
      cursors[i]->next_geq(candidate);
      if (cursors[i]->docid() != candidate) {
        all = false;
        cursors[0]->next_geq(cursors[i]->docid());
      }
    }
    if (all) {
      docs.push_back(candidate);
      cursors[0]->next();
    }
    candidate = cursors[0]->docid();
  }
  return docs;
}

namespace {

void add_docs(std::vector<DocId>& out, const std::vector<DocId>& docs) {
  std::vector<DocId> merged;
  std::set_union(out.begin(), out.end(), docs.begin(), docs.end(), std::back_inserter(merged));
  out.swap(merged);
}

// The documents holding the required words (where `words`) and every phrase.
std::vector<DocId> required_docs(const Query& query, const IndexView& index, bool words, CursorStats* stats) {
  std::vector<DocId> allowed;
  bool first = true;
  if (words && !query.required.empty()) allowed = holding_all(query.required, index, stats), first = false;
  for (const std::vector<std::string>& phrase : query.phrases) {
    if (!first && allowed.empty()) break;
    std::vector<DocId> docs = phrase_docs(phrase, index), both;
    if (first) {
      allowed = std::move(docs), first = false;
      continue;
    }
    std::set_intersection(allowed.begin(), allowed.end(), docs.begin(), docs.end(), std::back_inserter(both));
    allowed.swap(both);
  }
  return allowed;
}

}  // namespace

std::optional<ConstraintDocs> constraint_docs(const Query& query, const IndexView& index, bool required,
                                              CursorStats* stats) {
  // Phrases are constraints whoever holds the required words.
  const bool requiring = (required && !query.required.empty()) || !query.phrases.empty();
  if (!requiring && query.excluded.empty() && query.excluded_phrases.empty() && !query.filter) return std::nullopt;
  CursorStats unused;
  if (stats == nullptr) stats = &unused;
  std::vector<DocId> out;
  for (const std::vector<std::string>& group : query.excluded) add_docs(out, holding_all(group, index, stats));
  for (const std::vector<std::string>& phrase : query.excluded_phrases) add_docs(out, phrase_docs(phrase, index));
  if (!query.filter) {
    if (!requiring) return ConstraintDocs{false, std::move(out)};
    std::vector<DocId> allowed = required_docs(query, index, required, stats), left;
    std::set_difference(allowed.begin(), allowed.end(), out.begin(), out.end(), std::back_inserter(left));
    return ConstraintDocs{true, std::move(left)};
  }
  // The filter's documents, less those excluded, and of the required words' where there are such
  // (as the documents allowed: no more than the required words' lists hold); else as the bits of
  // the documents kept out.
  const uint32_t n = index.doc_count();
  const DocId begin = index.meta.doc_begin;
  std::vector<uint64_t> bits = *cached_filter_bits(*query.filter, index.columns.get(), n);
  for (DocId doc : out) bits[(doc - begin) / 64] &= ~(uint64_t{1} << ((doc - begin) % 64));
  if (requiring) {
    std::vector<DocId> allowed;
    for (DocId doc : required_docs(query, index, required, stats))
      if (bits[(doc - begin) / 64] >> ((doc - begin) % 64) & 1) allowed.push_back(doc);
    return ConstraintDocs{true, std::move(allowed)};
  }
  for (uint64_t& word : bits) word = ~word;
  if (n % 64 != 0) bits.back() &= (uint64_t{1} << (n % 64)) - 1;
  return ConstraintDocs{false, {}, std::move(bits)};
}

std::vector<uint64_t> kept_out_bits(ConstraintDocs docs, const IndexView& index) {
  if (!docs.kept_out.empty()) return std::move(docs.kept_out);
  const size_t n = index.doc_count();
  std::vector<uint64_t> bits((n + 63) / 64, docs.allowed ? ~uint64_t{0} : 0);
  const DocId begin = index.meta.doc_begin;
  for (DocId doc : docs.docs) {
    const size_t d = doc - begin;
    if (docs.allowed) {
      bits[d / 64] &= ~(uint64_t{1} << (d % 64));
    } else {
      bits[d / 64] |= uint64_t{1} << (d % 64);
    }
  }
  return bits;
}

}  // namespace warp
