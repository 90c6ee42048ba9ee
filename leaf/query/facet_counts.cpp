#include "leaf/query/facet_counts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "leaf/query/live_overlay.hpp"
#include "leaf/query/query_constraints.hpp"
#include "leaf/query/query_processor.hpp"

namespace warp {

FacetCounter::FacetCounter(std::vector<std::string> fields, uint64_t max_postings)
    : fields_(std::move(fields)),
      max_postings_(max_postings),
      keyword_counts_(fields_.size()),
      numeric_counts_(fields_.size()) {}

void FacetCounter::count(const Query& query, bool any_term, const IndexView& index, const std::vector<uint8_t>& deleted,
                         CursorStats* stats) {
  if (!result_.error.empty()) return;
  CursorStats unused;
  if (stats == nullptr) stats = &unused;
  const uint32_t n = index.doc_count();
  const DocId begin = index.meta.doc_begin;
  std::vector<std::string> terms;  // in the partition
  for (const QueryTerm& term : distinct_terms(query)) {
    const TermInfo* info = index.find(term.text);
    if (info == nullptr) {
      if (!any_term) return;  // no document holds every term
      continue;
    }
    terms.push_back(term.text);
    postings_ += index.list(term.text, *info).count;
  }
  if (postings_ > max_postings_) {
    result_.error = "the query's lists hold more than " + std::to_string(max_postings_) +
                    " postings (--max-facet-postings): facets not counted";
    return;
  }
  if (terms.empty()) return;
  // The matching documents, a bit each.
  std::vector<uint64_t> match((size_t{n} + 63) / 64, 0);
  const auto set = [&](DocId doc) { match[(doc - begin) / 64] |= uint64_t{1} << ((doc - begin) % 64); };
  if (any_term) {
    for (const std::string& term : terms) {
      PostingCursor cursor(index.list(term, *index.find(term)), nullptr, begin, TermScoring{}, stats);
      for (; cursor.docid() != kEndDoc; cursor.next()) set(cursor.docid());
    }
  } else {
    for (DocId doc : holding_all(terms, index, stats)) set(doc);
  }
  if (std::optional<ConstraintDocs> constraints = constraint_docs(query, index, true, stats)) {
    const std::vector<uint64_t> out = kept_out_bits(std::move(*constraints), index);
    for (size_t w = 0; w < match.size(); ++w) match[w] &= ~out[w];
  }
  for (size_t d = 0; d < deleted.size() && d < n; ++d)
    if (deleted[d]) match[d / 64] &= ~(uint64_t{1} << (d % 64));

  const DocColumns* columns = index.columns.get();
  std::vector<std::vector<uint64_t>> by_id(fields_.size());
  std::vector<const KeywordColumn*> keyword(fields_.size(), nullptr);
  std::vector<const NumericColumn*> numeric(fields_.size(), nullptr);
  for (size_t f = 0; f < fields_.size() && columns; ++f) {
    keyword[f] = columns->keyword_field(fields_[f]);
    numeric[f] = columns->numeric_field(fields_[f]);
    if (keyword[f]) by_id[f].assign(keyword[f]->values.size(), 0);
  }
  for (size_t w = 0; w < match.size(); ++w) {
    for (uint64_t bits = match[w]; bits != 0; bits &= bits - 1) {
      const uint32_t d = static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
      ++result_.matches;
      for (size_t f = 0; f < fields_.size(); ++f) {
        if (keyword[f]) {
          for (uint32_t id : keyword[f]->values_of(d)) ++by_id[f][id];
        } else if (numeric[f] && !std::isnan(numeric[f]->values[d])) {
          ++numeric_counts_[f][numeric[f]->values[d]];
        }
      }
    }
  }
  for (size_t f = 0; f < fields_.size(); ++f)
    for (size_t id = 0; id < by_id[f].size(); ++id)
      if (by_id[f][id] > 0) keyword_counts_[f][keyword[f]->values[id]] += by_id[f][id];
}

void QueryProcessor::count_facets(const PreparedQuery& prepared, bool any_term, FacetCounter& counter) const {
  const LiveOverlay* live = prepared.index == &index() ? prepared.live : nullptr;
  static const std::vector<uint8_t> none;
  counter.count(prepared.query, any_term, index(), live ? live->deleted : none);
}

FacetResult FacetCounter::take(size_t max_values) {
  FacetResult result = std::move(result_);
  if (!result.error.empty()) return result;
  for (size_t f = 0; f < fields_.size(); ++f) {
    FacetField field{fields_[f], {}, 0, 0};
    for (auto& [value, count] : keyword_counts_[f]) field.values.push_back({value, count});
    for (const auto& [number, count] : numeric_counts_[f]) {
      char text[40];
      std::snprintf(text, sizeof text, "%.17g", number == 0 ? 0.0 : number);  // -0 counted as 0
      field.values.push_back({text, count});
    }
    std::sort(field.values.begin(), field.values.end(), [](const FacetValue& a, const FacetValue& b) {
      return a.count != b.count ? a.count > b.count : a.value < b.value;
    });
    for (size_t i = max_values; i < field.values.size(); ++i) field.others += field.values[i].count;
    if (field.values.size() > max_values) {
      field.other_values = field.values.size() - max_values;
      field.values.resize(max_values);
    }
    result.fields.push_back(std::move(field));
  }
  return result;
}

}  // namespace warp
