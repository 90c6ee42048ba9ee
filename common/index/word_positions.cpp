#include "common/index/word_positions.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "common/codec/bit_packing.hpp"
#include "common/index/stored_source.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace {

constexpr uint32_t kGroup = 128;      // values a width
constexpr uint32_t kHeaderWords = 4;  // documents, positions (two words), blocks
constexpr uint32_t kBodyGap = 1;      // between the title's last position and the body's first

void put_group(std::span<const uint32_t> values, std::vector<uint32_t>& out) {
  for (size_t at = 0; at < values.size(); at += kGroup) {
    const size_t n = std::min<size_t>(kGroup, values.size() - at);
    uint32_t any = 0;
    for (size_t i = 0; i < n; ++i) any |= values[at + i];
    const unsigned bits = bit_width32(any);
    out.push_back(bits);
    pack_bits(values.data() + at, n, bits, out);
  }
}

[[noreturn]] void damaged(const std::string& what) { throw Error("word positions row damaged: " + what); }

// Reads `n` values of groups from words[at, end), moving `at` past them.
void get_group(const uint32_t* words, size_t& at, size_t end, size_t n, uint32_t* out) {
  for (size_t done = 0; done < n; done += kGroup) {
    const size_t count = std::min<size_t>(kGroup, n - done);
    if (at >= end) damaged("a group runs past its block");
    const uint32_t bits = words[at++];
    if (bits > 32) damaged("a group's width is past 32 bits");
    const size_t need = packed_words(count, bits);
    if (need > end - at) damaged("a group runs past its block");
    unpack_bits(words + at, count, bits, out + done);
    at += need;
  }
}

const uint32_t* row_words(std::string_view row) { return reinterpret_cast<const uint32_t*>(row.data()); }

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
  std::vector<uint32_t> words = {static_cast<uint32_t>(n), static_cast<uint32_t>(positions.size()),
                                 static_cast<uint32_t>(uint64_t{positions.size()} >> 32),
                                 static_cast<uint32_t>(blocks)};
  std::vector<uint32_t> data, values;
  std::vector<uint32_t> offsets = {0};
  for (size_t b = 0; b < blocks; ++b) {
    const size_t lo = b * kPositionBlockDocs, hi = std::min(n, lo + kPositionBlockDocs);
    words.push_back(docs[hi - 1] - chunk_begin);
    values.clear();
    for (size_t i = lo; i < hi; ++i)
      values.push_back(i == lo ? docs[i] - (b == 0 ? chunk_begin : docs[lo - 1] + 1) : docs[i] - docs[i - 1] - 1);
    put_group(values, data);
    values.clear();
    for (size_t i = lo; i < hi; ++i) values.push_back(starts[i + 1] - starts[i] - 1);
    put_group(values, data);
    values.clear();
    for (size_t i = lo; i < hi; ++i) {
      for (uint32_t p = starts[i]; p < starts[i + 1]; ++p)
        values.push_back(p == starts[i] ? positions[p] : positions[p] - positions[p - 1] - 1);
    }
    put_group(values, data);
    offsets.push_back(static_cast<uint32_t>(data.size()));
  }
  words.insert(words.end(), offsets.begin(), offsets.end());
  words.insert(words.end(), data.begin(), data.end());
  return std::string(reinterpret_cast<const char*>(words.data()), words.size() * 4);
}

TermPositionsRow TermPositionsRow::parse(std::string_view row, DocId chunk_begin) {
  TermPositionsRow out;
  out.row_ = row;
  out.chunk_begin_ = chunk_begin;
  if (row.size() % 4 != 0 || row.size() < kHeaderWords * 4) damaged("not whole words, or no header");
  // Read as words in place: a row's bytes are a std::string's (WordPositions::row), aligned for them.
  const uint32_t* w = row_words(row);
  const size_t total = row.size() / 4;
  out.docs_ = w[0];
  out.positions_ = w[1] | (uint64_t{w[2]} << 32);
  const uint32_t blocks = w[3];
  if (blocks != (uint64_t{out.docs_} + kPositionBlockDocs - 1) / kPositionBlockDocs) damaged("block count");
  if (out.positions_ < out.docs_ || out.positions_ > uint64_t{total} * kGroup) damaged("position count");
  if (uint64_t{kHeaderWords} + 2 * uint64_t{blocks} + 1 > total) damaged("block table past the row");
  out.data_ = kHeaderWords + 2 * size_t{blocks} + 1;
  DocId previous = 0;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t last = w[kHeaderWords + b];
    if ((b > 0 && last <= previous) || uint64_t{chunk_begin} + last >= kEndDoc) damaged("block table out of order");
    previous = last;
    out.block_last_.push_back(chunk_begin + last);
  }
  for (uint32_t b = 0; b <= blocks; ++b) {
    const uint32_t offset = w[kHeaderWords + blocks + b];
    if ((b == 0 && offset != 0) || (b > 0 && offset < out.block_offset_.back()) || offset > total - out.data_)
      damaged("block offsets");
    out.block_offset_.push_back(offset);
  }
  return out;
}

void TermPositionsRow::decode(size_t block, PositionBlock& out) const {
  const uint32_t* w = row_words(row_);
  size_t at = data_ + block_offset_[block];
  const size_t end = data_ + block_offset_[block + 1];
  const size_t n = std::min<size_t>(kPositionBlockDocs, docs_ - block * kPositionBlockDocs);
  out.docs.resize(n);
  out.starts.resize(n + 1);
  get_group(w, at, end, n, out.docs.data());
  get_group(w, at, end, n, out.starts.data() + 1);
  uint64_t doc = block == 0 ? chunk_begin_ : uint64_t{block_last_[block - 1]} + 1;
  uint64_t count = 0;
  out.starts[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    doc += out.docs[i] + (i == 0 ? 0 : 1);
    out.docs[i] = static_cast<DocId>(doc);
    count += uint64_t{out.starts[i + 1]} + 1;
    if (count > positions_) damaged("more positions than the row holds");
    out.starts[i + 1] = static_cast<uint32_t>(count);
  }
  if (doc != block_last_[block]) damaged("a block's documents end elsewhere than its table says");
  out.positions.resize(count);
  get_group(w, at, end, count, out.positions.data());
  if (at != end) damaged("a block holds more than its documents");
  for (size_t i = 0; i < n; ++i) {
    uint64_t position = 0;
    for (uint32_t p = out.starts[i]; p < out.starts[i + 1]; ++p) {
      position = p == out.starts[i] ? out.positions[p] : position + out.positions[p] + 1;
      if (position > UINT32_MAX) damaged("a position past 2^32");
      out.positions[p] = static_cast<uint32_t>(position);
    }
  }
}

std::optional<std::string> InMemoryPositions::row(DocId chunk, std::string_view term) const {
  auto it = rows_.find(position_key(chunk, term));
  if (it == rows_.end()) return std::nullopt;
  return it->second;
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
    : analyzer_(std::make_unique<Analyzer>(analyzer)), chunk_begin_(chunk_begin) {}
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

void PositionsBuilder::add(DocId doc, std::string_view title, std::string_view body) {
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
  for (const auto& [term, list] : terms_)
    visit(position_key(chunk_begin_, term),
          encode_term_positions(chunk_begin_, list.docs, list.starts, list.positions));
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

std::shared_ptr<const InMemoryPositions> positions_of_sources(const AnalyzerConfig& analyzer, DocId begin,
                                                              std::span<const uint32_t> lengths,
                                                              const std::function<std::string_view(DocId)>& source) {
  const DocId end = begin + static_cast<DocId>(lengths.size());
  std::vector<DocId> chunks = position_chunk_begins(begin, lengths);
  std::map<std::string, std::string> rows;
  for (size_t c = 0; c < chunks.size(); ++c) {
    PositionsBuilder builder(analyzer, chunks[c]);
    const DocId chunk_end = c + 1 < chunks.size() ? chunks[c + 1] : end;
    for (DocId doc = chunks[c]; doc < chunk_end; ++doc) builder.add_source(doc, source(doc));
    rows.merge(builder.rows());
  }
  return std::make_shared<const InMemoryPositions>(std::move(chunks), std::move(rows));
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
