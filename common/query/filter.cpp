#include "common/query/filter.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <list>
#include <mutex>
#include <unordered_map>

namespace warp {
namespace {

bool field_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  FilterNode parse() {
    skip_space();
    if (at_end()) fail(1, "the filter is empty");
    FilterNode node = parse_or();
    skip_space();
    if (!at_end()) fail(pos_ + 1, text_[pos_] == ')' ? "a ')' closes nothing" : "expected AND, OR or the end here");
    return node;
  }

 private:
  [[noreturn]] void fail(size_t column, const std::string& what) {
    throw FilterError("filter, column " + std::to_string(column) + ": " + what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  // The keyword `word` (AND, OR, NOT) as a whole token here.
  bool keyword(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    const size_t after = pos_ + word.size();
    if (after < text_.size() && text_[after] != ' ' && text_[after] != '\t' && text_[after] != '(') return false;
    pos_ = after;
    return true;
  }
  FilterNode combine(FilterNode::Kind kind, std::vector<FilterNode> children) {
    if (children.size() == 1) return std::move(children[0]);
    FilterNode node;
    node.kind = kind;
    node.children = std::move(children);
    return node;
  }
  FilterNode parse_or() {
    std::vector<FilterNode> children{parse_and()};
    while (keyword("OR")) children.push_back(parse_and());
    return combine(FilterNode::Kind::kOr, std::move(children));
  }
  FilterNode parse_and() {
    std::vector<FilterNode> children{parse_unary()};
    while (keyword("AND")) children.push_back(parse_unary());
    return combine(FilterNode::Kind::kAnd, std::move(children));
  }
  FilterNode parse_unary() {
    if (++depth_ > 32) fail(pos_ + 1, "nested more than 32 deep");
    FilterNode node;
    if (keyword("NOT")) {
      node.kind = FilterNode::Kind::kNot;
      node.children.push_back(parse_unary());
    } else {
      skip_space();
      if (!at_end() && text_[pos_] == '(') {
        const size_t open = pos_ + 1;
        ++pos_;
        node = parse_or();
        skip_space();
        if (at_end() || text_[pos_] != ')') fail(open, "the parenthesis opened here is never closed");
        ++pos_;
      } else {
        node = parse_test();
      }
    }
    --depth_;
    return node;
  }
  FilterNode parse_test() {
    skip_space();
    const size_t start = pos_;
    if (at_end()) fail(pos_ + 1, "a test (field:value or field>=number) is missing at the end");
    while (!at_end() && field_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail(start + 1, "a test starts with a field name (letters, digits, '_', '-', '.')");
    if (++tests_ > kMaxFilterTests) fail(start + 1, "more than " + std::to_string(kMaxFilterTests) + " tests");
    FilterNode node;
    node.field = std::string(text_.substr(start, pos_ - start));
    const size_t op_at = pos_;
    const auto rest = text_.substr(pos_);
    const auto take = [&](std::string_view op, FilterNode::Op which) {
      if (rest.substr(0, op.size()) != op) return false;
      pos_ += op.size();
      node.kind = FilterNode::Kind::kCompare;
      node.op = which;
      return true;
    };
    if (!at_end() && text_[pos_] == ':') {
      ++pos_;
      node.kind = FilterNode::Kind::kEquals;
      node.value = parse_value();
      return node;
    }
    if (!take(">=", FilterNode::Op::kGreaterEqual) && !take("<=", FilterNode::Op::kLessEqual) &&
        !take(">", FilterNode::Op::kGreater) && !take("<", FilterNode::Op::kLess) && !take("=", FilterNode::Op::kEqual))
      fail(op_at + 1, "after the field '" + node.field + "' comes ':' or a comparison (>= > <= < =)");
    const size_t number_at = pos_;
    const std::string number = parse_value();
    double value = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (error != std::errc() || end != number.data() + number.size() || !std::isfinite(value))
      fail(number_at + 1, "'" + number + "' is not a number");
    node.number = value;
    return node;
  }
  // A quoted string (\" and \\ escaped) or a bare run up to white space or a parenthesis.
  std::string parse_value() {
    const size_t start = pos_;
    std::string value;
    if (!at_end() && text_[pos_] == '"') {
      for (++pos_; !at_end() && text_[pos_] != '"'; ++pos_) {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
        value += text_[pos_];
      }
      if (at_end()) fail(start + 1, "the quote opened here is never closed");
      ++pos_;
      return value;
    }
    while (!at_end() && text_[pos_] != ' ' && text_[pos_] != '\t' && text_[pos_] != '(' && text_[pos_] != ')')
      value += text_[pos_++];
    if (value.empty()) fail(start + 1, "a value is missing here (quote an empty one: \"\")");
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  size_t tests_ = 0;
};

std::string quoted(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

const char* op_text(FilterNode::Op op) {
  switch (op) {
    case FilterNode::Op::kLess:
      return "<";
    case FilterNode::Op::kLessEqual:
      return "<=";
    case FilterNode::Op::kGreater:
      return ">";
    case FilterNode::Op::kGreaterEqual:
      return ">=";
    case FilterNode::Op::kEqual:
      return "=";
  }
  return "=";
}

// A word of 64 documents at a time, the comparison chosen once (a loop the compiler vectorizes:
// a switch per document had been 4.4 ns a document).
template <class Test>
std::vector<uint64_t> bits_where(const std::vector<double>& values, size_t words, Test test) {
  std::vector<uint64_t> bits(words, 0);
  for (size_t w = 0; w < words; ++w) {
    const size_t base = w * 64, end = std::min<size_t>(64, values.size() - std::min(values.size(), base));
    uint64_t word = 0;
    for (size_t j = 0; j < end; ++j) word |= static_cast<uint64_t>(test(values[base + j])) << j;
    bits[w] = word;
  }
  return bits;
}

// NaN (no value) compares false every way.
std::vector<uint64_t> numeric_bits(const NumericColumn& column, FilterNode::Op op, double number, size_t words) {
  const std::vector<double>& v = column.values;
  switch (op) {
    case FilterNode::Op::kLess:
      return bits_where(v, words, [number](double x) { return x < number; });
    case FilterNode::Op::kLessEqual:
      return bits_where(v, words, [number](double x) { return x <= number; });
    case FilterNode::Op::kGreater:
      return bits_where(v, words, [number](double x) { return x > number; });
    case FilterNode::Op::kGreaterEqual:
      return bits_where(v, words, [number](double x) { return x >= number; });
    case FilterNode::Op::kEqual:
      break;
  }
  return bits_where(v, words, [number](double x) { return x == number; });
}

}  // namespace

FilterNode parse_filter(std::string_view text) { return Parser(text).parse(); }

FilterNode and_all(std::vector<FilterNode> filters) {
  if (filters.size() == 1) return std::move(filters[0]);
  FilterNode node;
  node.kind = FilterNode::Kind::kAnd;
  node.children = std::move(filters);
  return node;
}

std::string filter_text(const FilterNode& filter) {
  switch (filter.kind) {
    case FilterNode::Kind::kAnd:
    case FilterNode::Kind::kOr: {
      std::string out = "(";
      for (size_t i = 0; i < filter.children.size(); ++i) {
        if (i > 0) out += filter.kind == FilterNode::Kind::kAnd ? " AND " : " OR ";
        out += filter_text(filter.children[i]);
      }
      return out + ")";
    }
    case FilterNode::Kind::kNot:
      return "(NOT " + filter_text(filter.children[0]) + ")";
    case FilterNode::Kind::kEquals:
      return filter.field + ":" + quoted(filter.value);
    case FilterNode::Kind::kCompare: {
      char number[40];
      std::snprintf(number, sizeof number, "%.17g", filter.number);
      return filter.field + op_text(filter.op) + number;
    }
  }
  return "";
}

void check_filter(const FilterNode& filter, const ColumnSchema& schema) {
  const auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const auto fields = [&] {
    std::string all;
    for (const auto* names : {&schema.keyword, &schema.numeric})
      for (const std::string& name : *names) all += (all.empty() ? "" : ", ") + name;
    return all.empty() ? std::string("none: the index declares no keyword or numeric fields") : all;
  };
  for (const FilterNode& child : filter.children) check_filter(child, schema);
  if (filter.kind != FilterNode::Kind::kEquals && filter.kind != FilterNode::Kind::kCompare) return;
  const bool keyword = has(schema.keyword, filter.field), numeric = has(schema.numeric, filter.field);
  if (!keyword && !numeric)
    throw FilterError("filter: no field '" + filter.field + "' to filter on (the index's fields: " + fields() + ")");
  if (filter.kind == FilterNode::Kind::kCompare && keyword)
    throw FilterError("filter: '" + filter.field + "' is a keyword field; compare numeric fields only");
  if (filter.kind == FilterNode::Kind::kEquals && numeric) {
    double value = 0;
    const auto [end, error] = std::from_chars(filter.value.data(), filter.value.data() + filter.value.size(), value);
    if (error != std::errc() || end != filter.value.data() + filter.value.size())
      throw FilterError("filter: '" + filter.field + "' is a numeric field and '" + filter.value + "' is not a number");
  }
}

std::vector<uint64_t> filter_bits(const FilterNode& filter, const DocColumns* columns, uint32_t doc_count) {
  const size_t words = (size_t{doc_count} + 63) / 64;
  const uint64_t tail = doc_count % 64 == 0 ? ~uint64_t{0} : (uint64_t{1} << (doc_count % 64)) - 1;
  switch (filter.kind) {
    case FilterNode::Kind::kAnd:
    case FilterNode::Kind::kOr: {
      const bool all = filter.kind == FilterNode::Kind::kAnd;
      std::vector<uint64_t> bits = filter_bits(filter.children[0], columns, doc_count);
      for (size_t i = 1; i < filter.children.size(); ++i) {
        const std::vector<uint64_t> more = filter_bits(filter.children[i], columns, doc_count);
        for (size_t w = 0; w < words; ++w) bits[w] = all ? bits[w] & more[w] : bits[w] | more[w];
      }
      return bits;
    }
    case FilterNode::Kind::kNot: {
      std::vector<uint64_t> bits = filter_bits(filter.children[0], columns, doc_count);
      for (uint64_t& word : bits) word = ~word;
      if (words > 0) bits.back() &= tail;
      return bits;
    }
    case FilterNode::Kind::kEquals: {
      std::vector<uint64_t> bits(words, 0);
      if (columns == nullptr) return bits;
      if (const KeywordColumn* column = columns->keyword_field(filter.field)) {
        if (const auto id = column->find(filter.value))
          for (uint32_t d : column->docs_of(*id)) bits[d / 64] |= uint64_t{1} << (d % 64);
        return bits;
      }
      if (const NumericColumn* column = columns->numeric_field(filter.field)) {
        double value = 0;
        const auto [end, error] =
            std::from_chars(filter.value.data(), filter.value.data() + filter.value.size(), value);
        if (error == std::errc() && end == filter.value.data() + filter.value.size())
          return numeric_bits(*column, FilterNode::Op::kEqual, value, words);
      }
      return bits;
    }
    case FilterNode::Kind::kCompare: {
      const NumericColumn* column = columns ? columns->numeric_field(filter.field) : nullptr;
      if (column == nullptr) return std::vector<uint64_t>(words, 0);
      return numeric_bits(*column, filter.op, filter.number, words);
    }
  }
  return std::vector<uint64_t>(words, 0);
}

namespace {

struct FilterCache {
  std::mutex mutex;
  size_t max_bytes = size_t{256} << 20;
  using Entry = std::pair<std::string, std::shared_ptr<const std::vector<uint64_t>>>;
  std::list<Entry> order;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  FilterCacheStats stats;

  void trim() {
    while (stats.bytes > max_bytes && !order.empty()) {
      stats.bytes -= order.back().second->size() * sizeof(uint64_t);
      index.erase(order.back().first);
      order.pop_back();
    }
    stats.entries = order.size();
  }
};

FilterCache& filter_cache() {
  static FilterCache cache;
  return cache;
}

}  // namespace

std::shared_ptr<const std::vector<uint64_t>> cached_filter_bits(const FilterNode& filter, const DocColumns* columns,
                                                                uint32_t doc_count) {
  FilterCache& cache = filter_cache();
  if (columns == nullptr) return std::make_shared<const std::vector<uint64_t>>(filter_bits(filter, columns, doc_count));
  const std::string key = std::to_string(columns->serial) + ' ' + std::to_string(doc_count) + ' ' + filter_text(filter);
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.index.find(key);
    if (it != cache.index.end()) {
      cache.order.splice(cache.order.begin(), cache.order, it->second);
      ++cache.stats.hits;
      return it->second->second;
    }
    ++cache.stats.misses;
  }
  // Computed outside the lock: two threads asking at once both compute, one keeps its result.
  auto bits = std::make_shared<const std::vector<uint64_t>>(filter_bits(filter, columns, doc_count));
  std::lock_guard<std::mutex> lock(cache.mutex);
  const size_t bytes = bits->size() * sizeof(uint64_t);
  if (bytes > cache.max_bytes || cache.index.count(key)) return bits;
  cache.order.emplace_front(key, bits);
  cache.index.emplace(key, cache.order.begin());
  cache.stats.bytes += bytes;
  cache.trim();
  return bits;
}

void set_filter_cache_bytes(size_t bytes) {
  FilterCache& cache = filter_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.max_bytes = bytes;
  cache.trim();
}

FilterCacheStats filter_cache_stats() {
  FilterCache& cache = filter_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}

}  // namespace warp
