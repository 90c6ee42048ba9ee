#include "indexer/writes/collection_state.hpp"

#include <algorithm>
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

AnalyzedPut CollectionState::analyze(Analyzer& analyzer, const WriteOp& op) const {
  AnalyzedPut put;
  const nlohmann::json doc = nlohmann::json::parse(op.document, nullptr, false);
  if (!doc.is_object()) return put;
  const auto text = [&](const char* field) -> std::string {
    auto it = doc.find(field);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  put.ok = true;
  put.title = text("title"), put.url = text("url");
  std::vector<std::string> terms;
  analyzer.analyze(put.title, terms);  // as IndexBuilder::add_document: the title, then the body
  put.title_tokens = static_cast<uint32_t>(terms.size());
  analyzer.analyze(text("body"), terms);
  put.length = static_cast<uint32_t>(terms.size());
  // The distinct terms sorted (every indexer sends the same bytes), and each word in order as the
  // index of its term among them (the leaves' word positions).
  std::vector<uint32_t> order(terms.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return terms[a] < terms[b] || (terms[a] == terms[b] && a < b); });
  put.tokens.resize(terms.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && terms[order[j]] == terms[order[i]]) ++j;
    const auto index = static_cast<uint32_t>(put.terms.size());
    for (size_t k = i; k < j; ++k) put.tokens[order[k]] = index;
    auto known = term_ids_.find(terms[order[i]]);
    put.term_ids.push_back(known != term_ids_.end() ? known->second : AnalyzedPut::kNewTerm);
    put.terms.emplace_back(std::move(terms[order[i]]), static_cast<uint32_t>(j - i));
    i = j;
  }
  return put;
}

LoggedWrite CollectionState::apply(uint64_t sequence, const WriteOp& op, bool* ok) {
  return apply(sequence, op, op.kind == WriteOp::Kind::kPut ? analyze(analyzer_, op) : AnalyzedPut{}, ok);
}

LoggedWrite CollectionState::apply(uint64_t sequence, const WriteOp& op, AnalyzedPut analyzed, bool* ok) {
  LoggedWrite write;
  write.sequence = sequence;
  write.id = op.id;
  write.kind = op.kind == WriteOp::Kind::kPut ? LoggedWrite::Kind::kPut : LoggedWrite::Kind::kDelete;
  const bool adds = op.kind == WriteOp::Kind::kPut;
  if (adds && !analyzed.ok) {
    if (ok) *ok = false;
    write.doc_count = docs_.size(), write.total_length = total_length_;
    return write;
  }
  // df changes: -1 for the old copy's terms, +1 for the new one's (a merge of the two sorted term
  // id lists); every term of the new copy is sent, moved or not: the leaf's segment takes each
  // term's df from here (a term of the replaced copy too, with the same count, would otherwise be
  // missing).
  Doc added;
  if (adds) {
    write.title = std::move(analyzed.title), write.url = std::move(analyzed.url);
    write.source = op.document;
    write.terms = std::move(analyzed.terms);
    write.length = analyzed.length;
    write.tokens = std::move(analyzed.tokens);
    write.title_tokens = analyzed.title_tokens;
    added.length = write.length;
    added.terms.reserve(write.terms.size());
    for (size_t i = 0; i < write.terms.size(); ++i) {
      const uint32_t known = i < analyzed.term_ids.size() ? analyzed.term_ids[i] : AnalyzedPut::kNewTerm;
      added.terms.push_back(known != AnalyzedPut::kNewTerm ? known : term_id(write.terms[i].first));
    }
    std::sort(added.terms.begin(), added.terms.end());
  }
  change_.clear();
  auto old = docs_.find(op.id);
  static const std::vector<uint32_t> kNone;
  const std::vector<uint32_t>& before = old != docs_.end() ? old->second.terms : kNone;
  for (size_t a = 0, b = 0; a < before.size() || b < added.terms.size();) {
    if (b == added.terms.size() || (a < before.size() && before[a] < added.terms[b]))
      change_.emplace_back(before[a++], -1);
    else if (a == before.size() || added.terms[b] < before[a])
      change_.emplace_back(added.terms[b++], 1);
    else
      change_.emplace_back(added.terms[b++], 0), ++a;
  }
  if (old != docs_.end()) {
    total_length_ -= old->second.length;
    if (adds) {
      total_length_ += added.length;
      old->second = std::move(added);
    } else {
      docs_.erase(old);
    }
  } else if (adds) {
    total_length_ += added.length;
    docs_.emplace(op.id, std::move(added));
  }
  write.df.reserve(change_.size());
  for (const auto& [t, delta] : change_) {
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
