#include "common/index/word_positions.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "common/codec/bit_packing.hpp"
#include "common/index/stored_source.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

constexpr uint32_t kGroup = 128;  // values a width
constexpr uint32_t kBodyGap = 1;  // between the title's last position and the body's first

[[noreturn]] void damaged(const std::string& what) { throw Error("word positions row damaged: " + what); }

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out += static_cast<char>(v | 0x80), v >>= 7;
  out += static_cast<char>(v);
}

uint64_t get_varint(std::string_view in, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= in.size()) damaged("a number runs past the row");
    const uint8_t byte = static_cast<uint8_t>(in[at++]);
    v |= uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) return v;
  }
  damaged("a number of more than 64 bits");
}

// `values` in groups of kGroup: a width byte, then the values bit-packed into as many bytes as
// they need.
void put_groups(std::span<const uint32_t> values, std::string& out) {
  std::vector<uint32_t> words;
  for (size_t at = 0; at < values.size(); at += kGroup) {
    const size_t n = std::min<size_t>(kGroup, values.size() - at);
    uint32_t any = 0;
    for (size_t i = 0; i < n; ++i) any |= values[at + i];
    const unsigned bits = bit_width32(any);
    out += static_cast<char>(bits);
    words.clear();
    pack_bits(values.data() + at, n, bits, words);
    out.append(reinterpret_cast<const char*>(words.data()), (n * bits + 7) / 8);
  }
}

// The group at `at` of `n` values (at most kGroup) into out[0, n); `at` moves past it.
void get_group(std::string_view in, size_t& at, size_t end, size_t n, uint32_t* out) {
  if (at >= end) damaged("a group runs past its block");
  const unsigned bits = static_cast<uint8_t>(in[at++]);
  if (bits > 32) damaged("a group's width is past 32 bits");
  const size_t bytes = (n * bits + 7) / 8;
  if (bytes > end - at) damaged("a group runs past its block");
  uint32_t words[kGroup + 1] = {};
  std::memcpy(words, in.data() + at, bytes);
  unpack_bits(words, n, bits, out);
  at += bytes;
}

// Past a group of `n` values, its bytes unread.
void skip_group(std::string_view in, size_t& at, size_t end, size_t n) {
  if (at >= end) damaged("a group runs past its block");
  const unsigned bits = static_cast<uint8_t>(in[at++]);
  if (bits > 32) damaged("a group's width is past 32 bits");
  const size_t bytes = (n * bits + 7) / 8;
  if (bytes > end - at) damaged("a group runs past its block");
  at += bytes;
}

}  // namespace

std::string position_key(DocId chunk_begin, std::string_view term) {
  std::string key(4, '\0');
  for (int i = 0; i < 4; ++i) key[i] = static_cast<char>(chunk_begin >> (24 - 8 * i));
  key.append(term);
  return key;
}

std::string encode_term_positions(DocId chunk_begin, std::span<const DocId> docs, std::span<const uint32_t> starts,
                                  std::span<const uint32_t> positions) {
  const size_t n = docs.size();
  const size_t blocks = (n + kPositionBlockDocs - 1) / kPositionBlockDocs;
  std::vector<std::string> data(blocks);
  std::vector<uint32_t> values;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t lo = b * kPositionBlockDocs, hi = std::min(n, lo + kPositionBlockDocs);
    values.clear();
    for (size_t i = lo; i < hi; ++i)
      values.push_back(i == lo ? docs[i] - (b == 0 ? chunk_begin : docs[lo - 1] + 1) : docs[i] - docs[i - 1] - 1);
    put_groups(values, data[b]);
    values.clear();
    for (size_t i = lo; i < hi; ++i) values.push_back(starts[i + 1] - starts[i] - 1);
    put_groups(values, data[b]);
    values.clear();
    for (size_t i = lo; i < hi; ++i) {
      for (uint32_t p = starts[i]; p < starts[i + 1]; ++p)
        values.push_back(p == starts[i] ? positions[p] : positions[p] - positions[p - 1] - 1);
    }
    put_groups(values, data[b]);
  }
  std::string row;
  put_varint(row, n);
  put_varint(row, positions.size());
  for (size_t b = 0; b < blocks; ++b) {
    const DocId last = docs[std::min(n, (b + 1) * kPositionBlockDocs) - 1];
    put_varint(row, b == 0 ? last - chunk_begin : last - docs[b * kPositionBlockDocs - 1] - 1);
    if (b + 1 < blocks) put_varint(row, data[b].size());
  }
  for (const std::string& block : data) row += block;
  return row;
}

TermPositionsRow TermPositionsRow::parse(std::string_view row, DocId chunk_begin) {
  TermPositionsRow out;
  out.row_ = row;
  out.chunk_begin_ = chunk_begin;
  size_t at = 0;
  const uint64_t docs = get_varint(row, at), positions = get_varint(row, at);
  if (docs == 0 || docs > kEndDoc) damaged("document count");
  // A group of kGroup values takes a byte at least.
  if (positions < docs || positions / kGroup > row.size()) damaged("position count");
  out.docs_ = static_cast<uint32_t>(docs);
  out.positions_ = positions;
  const size_t blocks = (docs + kPositionBlockDocs - 1) / kPositionBlockDocs;
  uint64_t last = chunk_begin;
  std::vector<uint64_t> sizes;
  for (size_t b = 0; b < blocks; ++b) {
    last += get_varint(row, at) + (b == 0 ? 0 : 1);
    if (last >= kEndDoc) damaged("a block's last document is past the docIDs");
    out.block_last_.push_back(static_cast<DocId>(last));
    if (b + 1 < blocks) sizes.push_back(get_varint(row, at));
  }
  out.block_at_.push_back(at);
  for (uint64_t size : sizes) {
    if (size > row.size() - out.block_at_.back()) damaged("a block runs past the row");
    out.block_at_.push_back(out.block_at_.back() + size);
  }
  out.block_at_.push_back(row.size());
  return out;
}

void TermPositionsRow::decode(size_t block, PositionBlock& out) const {
  size_t at = block_at_[block];
  const size_t end = block_at_[block + 1];
  const size_t n = std::min<size_t>(kPositionBlockDocs, docs_ - block * kPositionBlockDocs);
  out.docs.resize(n);
  out.starts.resize(n + 1);
  get_group(row_, at, end, n, out.docs.data());
  get_group(row_, at, end, n, out.starts.data() + 1);
  uint64_t doc = block == 0 ? chunk_begin_ : uint64_t{block_last_[block - 1]} + 1;
  uint64_t count = 0;
  out.starts[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    doc += out.docs[i] + (i == 0 ? 0 : 1);
    if (doc > block_last_[block]) damaged("a block's documents pass its last");
    out.docs[i] = static_cast<DocId>(doc);
    count += uint64_t{out.starts[i + 1]} + 1;
    if (count > positions_) damaged("more positions than the row holds");
    out.starts[i + 1] = static_cast<uint32_t>(count);
  }
  if (doc != block_last_[block]) damaged("a block's documents end elsewhere than its table says");
  // The position groups located, none decoded yet.
  const size_t groups = (count + kGroup - 1) / kGroup;
  out.groups_ = row_.substr(at, end - at);
  out.group_at_.clear();
  size_t g_at = 0;
  for (size_t g = 0; g < groups; ++g) {
    out.group_at_.push_back(static_cast<uint32_t>(g_at));
    skip_group(out.groups_, g_at, out.groups_.size(), std::min<size_t>(kGroup, count - g * kGroup));
  }
  if (g_at != out.groups_.size()) damaged("a block holds more than its documents");
  out.group_at_.push_back(static_cast<uint32_t>(g_at));
  out.raw_.resize(count);
  out.decoded_.assign(groups, 0);
}

std::span<const uint32_t> PositionBlock::of(size_t i) {
  const uint32_t from = starts[i], to = starts[i + 1];
  for (size_t g = from / kGroup; g <= (to - 1) / kGroup; ++g) {
    if (decoded_[g]) continue;
    size_t at = group_at_[g];
    get_group(groups_, at, group_at_[g + 1], std::min<size_t>(kGroup, raw_.size() - g * kGroup),
              raw_.data() + g * kGroup);
    decoded_[g] = 1;
  }
  positions_.resize(to - from);
  uint64_t position = 0;
  for (uint32_t p = from; p < to; ++p) {
    position = p == from ? raw_[p] : position + raw_[p] + 1;
    if (position > UINT32_MAX) damaged("a position past 2^32");
    positions_[p - from] = static_cast<uint32_t>(position);
  }
  return positions_;
}

bool InMemoryPositions::row(DocId chunk, std::string_view term, PositionRow& out) const {
  auto it = rows_.find(position_key(chunk, term));
  if (it == rows_.end()) return false;
  out.bytes = it->second;
  out.keep.reset();
  return true;
}

void InMemoryPositions::for_each_row(
    const std::function<void(std::string_view key, std::string_view row)>& visit) const {
  for (const auto& [key, value] : rows_) visit(key, value);
}

uint64_t InMemoryPositions::bytes() const {
  uint64_t bytes = 0;
  for (const auto& [key, value] : rows_) bytes += key.size() + value.size();
  return bytes;
}

PositionsBuilder::PositionsBuilder(const AnalyzerConfig& analyzer, DocId chunk_begin)
    : config_(analyzer), chunk_begin_(chunk_begin) {}
PositionsBuilder::PositionsBuilder(PositionsBuilder&&) noexcept = default;
PositionsBuilder::~PositionsBuilder() = default;

void PositionsBuilder::check_order(DocId doc) {
  if (doc < chunk_begin_ || (last_doc_ && doc <= *last_doc_))
    throw Error("word positions: documents must come in docID order from the chunk's first");
  last_doc_ = doc;
}

void PositionsBuilder::add_term(DocId doc, const std::string& term, uint32_t position) {
  auto it = terms_.find(term);
  if (it == terms_.end()) it = terms_.emplace(term, TermList{}).first;
  TermList& list = it->second;
  if (list.docs.empty() || list.docs.back() != doc) {
    list.docs.push_back(doc);
    list.starts.push_back(list.starts.back());
  }
  list.positions.push_back(position);
  ++list.starts.back();
  ++position_count_;
}

void PositionsBuilder::add_terms(DocId doc, std::span<const std::string> title, std::span<const std::string> body) {
  check_order(doc);
  uint32_t position = 0;
  for (const std::string& term : title) add_term(doc, term, position++);
  if (!title.empty()) position += kBodyGap;
  for (const std::string& term : body) add_term(doc, term, position++);
}

void PositionsBuilder::add_tokens(DocId doc, std::span<const std::pair<std::string, uint32_t>> terms,
                                  std::span<const uint32_t> tokens, uint32_t title_words) {
  check_order(doc);
  uint32_t position = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i == title_words && title_words > 0) position += kBodyGap;
    add_term(doc, terms[tokens[i]].first, position++);
  }
}

void PositionsBuilder::add(DocId doc, std::string_view title, std::string_view body) {
  if (!analyzer_) analyzer_ = std::make_unique<Analyzer>(config_);
  scratch_.clear();
  analyzer_->analyze(title, scratch_);
  const size_t title_terms = scratch_.size();
  analyzer_->analyze(body, scratch_);
  add_terms(doc, std::span<const std::string>(scratch_).first(title_terms),
            std::span<const std::string>(scratch_).subspan(title_terms));
}

void PositionsBuilder::add_source(DocId doc, std::string_view source) {
  add(doc, source_field(source, "title").value_or(std::string()), source_field(source, "body").value_or(std::string()));
}

void PositionsBuilder::rows(const std::function<void(const std::string& key, const std::string& row)>& visit) const {
  std::vector<const std::pair<const std::string, TermList>*> sorted;
  sorted.reserve(terms_.size());
  for (const auto& entry : terms_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  for (const auto* entry : sorted) {
    const auto& [term, list] = *entry;
    visit(position_key(chunk_begin_, term),
          encode_term_positions(chunk_begin_, list.docs, list.starts, list.positions));
  }
}

std::map<std::string, std::string> PositionsBuilder::rows() const {
  std::map<std::string, std::string> out;
  rows([&](const std::string& key, const std::string& row) { out.emplace_hint(out.end(), key, row); });
  return out;
}

std::vector<DocId> position_chunk_begins(DocId begin, std::span<const uint32_t> lengths) {
  std::vector<DocId> chunks = {begin};
  uint64_t positions = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const DocId doc = begin + static_cast<DocId>(i);
    if (doc - chunks.back() == kPositionChunkDocs ||
        (positions > 0 && positions + lengths[i] > kPositionChunkPositions))
      chunks.push_back(doc), positions = 0;
    positions += lengths[i];
  }
  return chunks;
}

std::shared_ptr<const InMemoryPositions> positions_of(const AnalyzerConfig& analyzer, DocId begin,
                                                      std::span<const uint32_t> lengths,
                                                      const std::function<void(DocId, PositionsBuilder&)>& add) {
  const DocId end = begin + static_cast<DocId>(lengths.size());
  std::vector<DocId> chunks = position_chunk_begins(begin, lengths);
  std::map<std::string, std::string> rows;
  for (size_t c = 0; c < chunks.size(); ++c) {
    PositionsBuilder builder(analyzer, chunks[c]);
    const DocId chunk_end = c + 1 < chunks.size() ? chunks[c + 1] : end;
    for (DocId doc = chunks[c]; doc < chunk_end; ++doc) add(doc, builder);
    rows.merge(builder.rows());
  }
  return std::make_shared<const InMemoryPositions>(std::move(chunks), std::move(rows));
}

std::shared_ptr<const InMemoryPositions> positions_of_sources(const AnalyzerConfig& analyzer, DocId begin,
                                                              std::span<const uint32_t> lengths,
                                                              const std::function<std::string_view(DocId)>& source) {
  return positions_of(analyzer, begin, lengths,
                      [&](DocId doc, PositionsBuilder& builder) { builder.add_source(doc, source(doc)); });
}

std::string position_chunks_text(const std::vector<DocId>& chunks) {
  std::string text;
  for (DocId chunk : chunks) text += (text.empty() ? "" : " ") + std::to_string(chunk);
  return text;
}

std::vector<DocId> parse_position_chunks(std::string_view text) {
  std::vector<DocId> chunks;
  std::istringstream in{std::string(text)};
  for (uint64_t chunk = 0; in >> chunk;) {
    if (chunk >= kEndDoc || (!chunks.empty() && chunk <= chunks.back()))
      throw Error("the partition's word position chunks are damaged");
    chunks.push_back(static_cast<DocId>(chunk));
  }
  if (!in.eof() || chunks.empty()) throw Error("the partition's word position chunks are damaged");
  return chunks;
}

}  // namespace warp
