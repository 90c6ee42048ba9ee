#include "indexer/writes/collection_state.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/index/index_files.hpp"
#include "common/index/posting_list.hpp"
#include "common/util/status.hpp"

namespace warp::writes {

CollectionState::CollectionState(const AnalyzerConfig& analyzer) : analyzer_(analyzer) {}

uint32_t CollectionState::term_id(const std::string& term) {
  auto [it, inserted] = term_ids_.try_emplace(term, static_cast<uint32_t>(terms_.size()));
  if (inserted) {
    terms_.push_back(term);
    df_.push_back(0);
  }
  return it->second;
}

uint64_t CollectionState::df(const std::string& term) const {
  auto it = term_ids_.find(term);
  return it == term_ids_.end() ? 0 : df_[it->second];
}

void CollectionState::clear() {
  term_ids_.clear(), terms_.clear(), df_.clear(), docs_.clear();
  total_length_ = 0;
}

void CollectionState::load_generation(const std::string& dir) {
  clear();
  const std::vector<std::unique_ptr<Partition>> partitions = open_index(dir);
  for (const auto& partition : partitions) {
    const IndexView& view = partition->view();
    std::vector<Doc> docs(view.doc_count());
    for (const auto& [term, info] : view.lexicon) {
      const uint32_t id = term_id(term);
      df_[id] = info.df;  // collection-wide in every partition
      for (const Posting& posting : decode_posting_list(view.list(term, info)))
        docs[posting.doc - view.meta.doc_begin].terms.push_back(id);
    }
    for (DocId d = 0; d < view.doc_count(); ++d) {
      docs[d].length = view.doc_lengths[d];
      total_length_ += docs[d].length;
      std::sort(docs[d].terms.begin(), docs[d].terms.end());
      docs_.insert_or_assign(view.external_ids[d], std::move(docs[d]));
    }
  }
}

LoggedWrite CollectionState::apply(uint64_t sequence, const WriteOp& op, bool* ok) {
  LoggedWrite write;
  write.sequence = sequence;
  write.id = op.id;
  write.kind = op.kind == WriteOp::Kind::kPut ? LoggedWrite::Kind::kPut : LoggedWrite::Kind::kDelete;
  Doc added;
  bool adds = false;
  if (op.kind == WriteOp::Kind::kPut) {
    const nlohmann::json doc = nlohmann::json::parse(op.document, nullptr, false);
    const auto text = [&](const char* field) -> std::string {
      if (!doc.contains(field)) return {};
      return doc[field].is_string() ? doc[field].get<std::string>() : std::string();
    };
    if (!doc.is_object()) {
      if (ok) *ok = false;
      write.doc_count = docs_.size(), write.total_length = total_length_;
      return write;
    }
    write.title = text("title"), write.url = text("url");
    write.source = op.document;
    scratch_.clear();
    analyzer_.analyze(write.title, scratch_);  // as IndexBuilder::add_document: the title, then the body
    analyzer_.analyze(text("body"), scratch_);
    std::map<std::string, uint32_t> counts;  // sorted: every indexer sends the same bytes
    for (const std::string& term : scratch_) ++counts[term];
    write.terms.assign(counts.begin(), counts.end());
    write.length = static_cast<uint32_t>(scratch_.size());
    added.length = write.length;
    for (const auto& [term, freq] : write.terms) added.terms.push_back(term_id(term));
    std::sort(added.terms.begin(), added.terms.end());
    adds = true;
  }
  // df changes: -1 for the old copy's terms, +1 for the new one's; only the terms that moved.
  std::map<uint32_t, int64_t> change;
  if (auto it = docs_.find(op.id); it != docs_.end()) {
    for (uint32_t t : it->second.terms) --change[t];
    total_length_ -= it->second.length;
    docs_.erase(it);
  }
  std::vector<uint32_t> added_terms;
  if (adds) {
    added_terms = added.terms;
    for (uint32_t t : added.terms) ++change[t];
    total_length_ += added.length;
    docs_.emplace(op.id, std::move(added));
  }
  std::vector<std::pair<std::string, uint64_t>> df;
  for (const auto& [t, delta] : change) {
    // Every term of the new copy, moved or not: the leaf's segment takes each term's df from here
    // (a term of the replaced copy too, with the same count, would otherwise be missing).
    if (delta == 0 && !std::binary_search(added_terms.begin(), added_terms.end(), t)) continue;
    df_[t] = static_cast<uint64_t>(static_cast<int64_t>(df_[t]) + delta);
    write.df.emplace_back(terms_[t], df_[t]);
  }
  std::sort(write.df.begin(), write.df.end());
  write.doc_count = docs_.size();
  write.total_length = total_length_;
  if (ok) *ok = true;
  return write;
}

}  // namespace warp::writes
