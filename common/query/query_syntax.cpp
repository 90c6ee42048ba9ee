#include "common/query/query_syntax.hpp"

#include <algorithm>
#include <set>

#include "common/analysis/analyzer.hpp"

namespace warp {

QuerySyntaxError::QuerySyntaxError(size_t column, const std::string& what)
    : Error("query syntax, column " + std::to_string(column) + ": " + what), column_(column) {}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_operator(char c) { return c == '+' || c == '-'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '.'; }

class Parser {
 public:
  explicit Parser(std::string_view q) : q_(q) {}

  std::vector<QueryClause> run() {
    while (true) {
      while (at_ < q_.size() && is_space(q_[at_])) ++at_;
      if (at_ == q_.size()) return std::move(clauses_);
      clause();
    }
  }

 private:
  size_t column() const { return at_ + 1; }
  bool ends_word(size_t i) const { return i >= q_.size() || is_space(q_[i]); }

  void clause() {
    QueryClause clause;
    clause.column = column();
    if (is_operator(q_[at_])) {
      if (ends_word(at_ + 1)) {  // a lone + or -: punctuation, as in a plain query
        ++at_;
        return;
      }
      if (is_operator(q_[at_ + 1])) {
        throw QuerySyntaxError(column(), std::string("'") + q_[at_] + q_[at_ + 1] +
                                             "': an operator must be followed by a word or a quote "
                                             "(write \\" +
                                             q_[at_ + 1] + " for the character itself)");
      }
      clause.occur = q_[at_] == '+' ? Occur::kMust : Occur::kMustNot;
      ++at_;
    }
    field(clause);
    if (q_[at_] == '"') {
      phrase(clause);
    } else {
      word(clause);
    }
    clauses_.push_back(std::move(clause));
  }

  // name: directly before a word or a quote names a field; "ratio: 2" or "a:" stays text.
  void field(QueryClause& clause) {
    if (!is_name_start(q_[at_])) return;
    size_t end = at_;
    while (end < q_.size() && is_name(q_[end])) ++end;
    if (end < q_.size() && q_[end] == ':' && !ends_word(end + 1) && q_[end + 1] != ':') {
      clause.field = std::string(q_.substr(at_, end - at_));
      at_ = end + 1;
      if (is_operator(q_[at_]) && !ends_word(at_ + 1)) {
        throw QuerySyntaxError(column(),
                               "an operator goes before the field (-" + clause.field + ":word), not after it");
      }
    }
  }

  void phrase(QueryClause& clause) {
    const size_t open = column();
    clause.phrase = true;
    ++at_;
    while (at_ < q_.size() && q_[at_] != '"') take(clause.text);
    if (at_ == q_.size()) {
      throw QuerySyntaxError(open, "the quote opened here is never closed (write \\\" for a quote character)");
    }
    ++at_;
  }

  // Up to white space or a quote (a quote inside a word begins a phrase clause of its own).
  void word(QueryClause& clause) {
    while (at_ < q_.size() && !is_space(q_[at_]) && q_[at_] != '"') take(clause.text);
  }

  void take(std::string& text) {
    if (q_[at_] == '\\' && at_ + 1 < q_.size()) ++at_;
    text += q_[at_++];
  }

  std::string_view q_;
  size_t at_ = 0;
  std::vector<QueryClause> clauses_;
};

}  // namespace

std::vector<QueryClause> parse_query_syntax(std::string_view q) { return Parser(q).run(); }

Query analyze_query_syntax(std::string_view q, Analyzer& analyzer, QueryMode mode, size_t k) {
  const std::vector<QueryClause> clauses = parse_query_syntax(q);
  std::string scored_text;
  for (const QueryClause& clause : clauses) {
    if (!clause.field.empty()) {
      throw QuerySyntaxError(clause.column, "field queries (" + clause.field +
                                                ":…) are not supported: a document's fields are indexed as one text "
                                                "(write \\: for a colon)");
    }
    if (clause.occur == Occur::kMustNot) continue;
    if (!scored_text.empty()) scored_text += ' ';
    scored_text += clause.text;
  }
  // The scored terms as a plain query of the same words gives them (stop words dropped unless
  // they are all there is), so that bare words score and rank as before.
  Query query(analyzer.analyze_query(scored_text), mode, k);
  const std::set<std::string, std::less<>> scored(query.terms.begin(), query.terms.end());
  std::set<std::string, std::less<>> required;
  for (const QueryClause& clause : clauses) {
    if (clause.phrase) {
      // Every word of it, stop words too, in order; one word is a word required or excluded.
      std::vector<std::string> words = analyzer.analyze(clause.text);
      if (words.size() >= 2) {
        if (clause.occur == Occur::kMustNot) {
          query.excluded_phrases.push_back(words);
        } else {
          for (const std::string& word : words)
            if (scored.count(word) != 0) required.insert(word);
          query.phrases.push_back(std::move(words));
        }
        continue;
      }
    }
    if (clause.occur == Occur::kMust || (clause.phrase && clause.occur == Occur::kShould)) {
      // A stop word dropped from the scored terms is not required either ("+the cat").
      for (std::string& term : analyzer.analyze(clause.text))
        if (scored.count(term) != 0) required.insert(std::move(term));
    } else if (clause.occur == Occur::kMustNot) {
      // The word as written: its stop words too ("-the" keeps out documents with "the").
      std::vector<std::string> group = analyzer.analyze(clause.text);
      std::sort(group.begin(), group.end());
      group.erase(std::unique(group.begin(), group.end()), group.end());
      if (!group.empty()) query.excluded.push_back(std::move(group));
    }
  }
  if (query.terms.empty() && (!query.excluded.empty() || !query.excluded_phrases.empty())) {
    throw QuerySyntaxError(1, "a query needs a word that is not excluded (-word only keeps documents out)");
  }
  query.required.assign(required.begin(), required.end());
  std::sort(query.excluded.begin(), query.excluded.end());
  query.excluded.erase(std::unique(query.excluded.begin(), query.excluded.end()), query.excluded.end());
  for (auto* phrases : {&query.phrases, &query.excluded_phrases}) {
    std::sort(phrases->begin(), phrases->end());
    phrases->erase(std::unique(phrases->begin(), phrases->end()), phrases->end());
  }
  return query;
}

}  // namespace warp
