#include "common/index/doc_columns.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/util/byte_io.hpp"
#include "common/util/checksum.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

constexpr uint32_t kColumnsMagic = 0x314C4F43;  // "COL1"
constexpr size_t kMaxKeywordBytes = 1024;       // a longer value is not kept (not a keyword)

void split_names(std::string_view list, std::vector<std::string>& out) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    if (list.empty()) out.emplace_back();  // a trailing comma: an empty name, refused below
  }
}

// A keyword value's text: strings as they are, numbers and booleans as JSON writes them.
std::optional<std::string> keyword_text(const nlohmann::json& value) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number() || value.is_boolean()) {
    text = value.dump();
  } else {
    return std::nullopt;
  }
  if (text.size() > kMaxKeywordBytes) return std::nullopt;
  return text;
}

}  // namespace

uint64_t next_columns_serial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

std::string ColumnSchema::describe() const {
  std::string out = "keyword=";
  for (size_t i = 0; i < keyword.size(); ++i) out += (i ? "," : "") + keyword[i];
  out += " numeric=";
  for (size_t i = 0; i < numeric.size(); ++i) out += (i ? "," : "") + numeric[i];
  return out;
}

ColumnSchema parse_column_schema(std::string_view keyword, std::string_view numeric) {
  ColumnSchema schema;
  split_names(keyword, schema.keyword);
  split_names(numeric, schema.numeric);
  std::vector<std::string> all = schema.keyword;
  all.insert(all.end(), schema.numeric.begin(), schema.numeric.end());
  for (const std::string& name : all) {
    const bool plain = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!plain) throw Error("field name '" + name + "': use 1 to 64 ASCII letters, digits, '_', '-' or '.'");
    if (name == "id" || name == "title" || name == "body" || name == "url")
      throw Error("field '" + name + "' is a text field of every document; it cannot be a column");
    if (std::count(all.begin(), all.end(), name) > 1) throw Error("field '" + name + "' is declared twice");
  }
  return schema;
}

void KeywordColumn::index_values(uint32_t doc_count) {
  const size_t count = values.size();
  value_starts.assign(count + 1, 0);
  for (uint32_t id : doc_values) ++value_starts[id + 1];
  for (size_t v = 0; v < count; ++v) value_starts[v + 1] += value_starts[v];
  value_docs.resize(doc_values.size());
  std::vector<uint32_t> next(value_starts.begin(), value_starts.end() - 1);
  for (uint32_t d = 0; d < doc_count; ++d)
    for (uint32_t id : values_of(d)) value_docs[next[id]++] = d;
}

std::optional<uint32_t> KeywordColumn::find(std::string_view value) const {
  auto it = std::lower_bound(values.begin(), values.end(), value);
  if (it == values.end() || *it != value) return std::nullopt;
  return static_cast<uint32_t>(it - values.begin());
}

const KeywordColumn* DocColumns::keyword_field(std::string_view field) const {
  for (const KeywordColumn& column : keyword)
    if (column.field == field) return &column;
  return nullptr;
}

const NumericColumn* DocColumns::numeric_field(std::string_view field) const {
  for (const NumericColumn& column : numeric)
    if (column.field == field) return &column;
  return nullptr;
}

ColumnSchema DocColumns::schema() const {
  ColumnSchema schema;
  for (const KeywordColumn& column : keyword) schema.keyword.push_back(column.field);
  for (const NumericColumn& column : numeric) schema.numeric.push_back(column.field);
  return schema;
}

std::string DocColumns::serialize() const {
  ByteWriter out;
  out.u32(kColumnsMagic);
  out.u32(doc_count);
  out.u32(static_cast<uint32_t>(keyword.size()));
  for (const KeywordColumn& column : keyword) {
    out.str(column.field);
    out.u32(static_cast<uint32_t>(column.values.size()));
    for (const std::string& value : column.values) out.str(value);
    out.array(column.doc_starts);
    out.array(column.doc_values);
  }
  out.u32(static_cast<uint32_t>(numeric.size()));
  for (const NumericColumn& column : numeric) {
    out.str(column.field);
    out.array(column.values);
  }
  const uint32_t crc = crc32_of(out.bytes().data(), out.bytes().size());
  out.u32(crc);
  return out.take();
}

DocColumns DocColumns::parse(std::string_view bytes, uint32_t doc_count) {
  if (bytes.size() < 4 || crc32_of(bytes.data(), bytes.size() - 4) !=
                              ByteReader(bytes.substr(bytes.size() - 4), "the columns' checksum").u32())
    throw Error("the columns row fails its checksum");
  ByteReader in(bytes.substr(0, bytes.size() - 4), "the columns row");
  if (in.u32() != kColumnsMagic) throw Error("the columns row is not of this format");
  DocColumns columns;
  columns.doc_count = in.u32();
  if (columns.doc_count != doc_count) throw Error("the columns row holds another number of documents");
  const uint32_t keywords = in.u32();
  if (keywords > 1024) throw Error("the columns row holds too many fields");
  for (uint32_t f = 0; f < keywords; ++f) {
    KeywordColumn column;
    column.field = in.str();
    const uint32_t count = in.u32();
    if (count > in.remaining() / 4) throw Error("the columns row is truncated");
    column.values.reserve(count);
    for (uint32_t v = 0; v < count; ++v) column.values.push_back(in.str());
    column.doc_starts = in.array<uint32_t>();
    column.doc_values = in.array<uint32_t>();
    if (column.doc_starts.size() != size_t{doc_count} + 1 || column.doc_starts.front() != 0 ||
        column.doc_starts.back() != column.doc_values.size() ||
        !std::is_sorted(column.doc_starts.begin(), column.doc_starts.end()) ||
        std::any_of(column.doc_values.begin(), column.doc_values.end(), [&](uint32_t id) { return id >= count; }))
      throw Error("the columns row's field '" + column.field + "' is inconsistent");
    for (uint32_t d = 0; d < doc_count; ++d) {
      const std::span<const uint32_t> ids = column.values_of(d);
      if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<uint32_t>()) != ids.end())
        throw Error("the columns row's field '" + column.field + "' repeats a document's value");
    }
    column.index_values(doc_count);
    columns.keyword.push_back(std::move(column));
  }
  const uint32_t numerics = in.u32();
  if (numerics > 1024) throw Error("the columns row holds too many fields");
  for (uint32_t f = 0; f < numerics; ++f) {
    NumericColumn column;
    column.field = in.str();
    column.values = in.array<double>();
    if (column.values.size() != doc_count)
      throw Error("the columns row's field '" + column.field + "' is inconsistent");
    columns.numeric.push_back(std::move(column));
  }
  if (!in.done()) throw Error("the columns row has bytes after its fields");
  return columns;
}

ColumnsBuilder::ColumnsBuilder(ColumnSchema schema)
    : schema_(std::move(schema)),
      strings_(schema_.keyword.size()),
      string_starts_(schema_.keyword.size(), std::vector<uint32_t>{0}),
      numbers_(schema_.numeric.size()) {}

void ColumnsBuilder::add(std::string_view source) {
  ++documents_;
  nlohmann::json doc;
  if (!source.empty() && !schema_.empty()) doc = nlohmann::json::parse(source, nullptr, false);
  const bool object = doc.is_object();
  for (size_t f = 0; f < schema_.keyword.size(); ++f) {
    std::vector<std::string> mine;
    if (object) {
      const auto it = doc.find(schema_.keyword[f]);
      if (it != doc.end()) {
        if (it->is_array()) {
          for (const nlohmann::json& element : *it)
            if (auto text = keyword_text(element)) mine.push_back(std::move(*text));
        } else if (auto text = keyword_text(*it)) {
          mine.push_back(std::move(*text));
        }
      }
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    for (std::string& value : mine) strings_[f].push_back(std::move(value));
    string_starts_[f].push_back(static_cast<uint32_t>(strings_[f].size()));
  }
  for (size_t f = 0; f < schema_.numeric.size(); ++f) {
    double value = std::numeric_limits<double>::quiet_NaN();
    if (object) {
      const auto it = doc.find(schema_.numeric[f]);
      if (it != doc.end() && it->is_number()) value = it->get<double>();
    }
    numbers_[f].push_back(value);
  }
}

void ColumnsBuilder::append(const ColumnsBuilder& next) {
  if (!(next.schema_ == schema_)) throw Error("joining columns of different fields");
  for (size_t f = 0; f < strings_.size(); ++f) {
    const uint32_t base = static_cast<uint32_t>(strings_[f].size());
    strings_[f].insert(strings_[f].end(), next.strings_[f].begin(), next.strings_[f].end());
    for (size_t d = 1; d < next.string_starts_[f].size(); ++d)
      string_starts_[f].push_back(base + next.string_starts_[f][d]);
  }
  for (size_t f = 0; f < numbers_.size(); ++f)
    numbers_[f].insert(numbers_[f].end(), next.numbers_[f].begin(), next.numbers_[f].end());
  documents_ += next.documents_;
}

DocColumns ColumnsBuilder::build() const {
  DocColumns columns;
  columns.doc_count = documents_;
  for (size_t f = 0; f < schema_.keyword.size(); ++f) {
    KeywordColumn column;
    column.field = schema_.keyword[f];
    column.values = strings_[f];
    std::sort(column.values.begin(), column.values.end());
    column.values.erase(std::unique(column.values.begin(), column.values.end()), column.values.end());
    std::unordered_map<std::string_view, uint32_t> ids;
    ids.reserve(column.values.size());
    for (size_t v = 0; v < column.values.size(); ++v) ids.emplace(column.values[v], static_cast<uint32_t>(v));
    column.doc_starts = string_starts_[f];
    column.doc_values.reserve(strings_[f].size());
    // Each document's values were sorted as strings: their ids, in the dictionary's order, ascend.
    for (const std::string& value : strings_[f]) column.doc_values.push_back(ids.at(value));
    column.index_values(documents_);
    columns.keyword.push_back(std::move(column));
  }
  for (size_t f = 0; f < schema_.numeric.size(); ++f) columns.numeric.push_back({schema_.numeric[f], numbers_[f]});
  return columns;
}

}  // namespace warp
