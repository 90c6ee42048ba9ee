// Word positions, for phrase queries: where each term occurs in each document. A position is the
// term's place in the document's analyzed text, counted from 0: the title's terms, then the body's
// after a gap of one (a phrase never runs from the title into the body), stop words counted like
// any word (documents keep them) and tokens past the analyzer's length cap not at all (dropped from
// documents and phrases alike, so a phrase matches the text around them).
//
// A partition keeps them (BuildOptions::positions, on in warp-indexer unless --no-positions) in a
// family of their own, in chunks of contiguous docIDs cut by the documents' lengths (at most
// kPositionChunkDocs documents and kPositionChunkPositions positions a chunk: what a build holds in
// memory at once for one), the same whoever builds the partition (a parallel build makes them side
// by side). A chunk's row for a term (key position_key) holds the documents of the chunk with the
// term, their frequencies and their positions, in blocks of 128 documents found through a table at
// the row's start (each block's last docID and length), so a phrase decodes only the blocks its
// rarest word reaches, and in a block only the positions of the documents it compares. Bytes: the
// documents and positions counted (varints), the table (varints), then each block's streams
// bit-packed in groups of 128 values, a width byte a group: docID gaps, frequencies less one, and
// each document's positions as the first one and then gaps less one.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/analysis/analyzer.hpp"
#include "common/index/types.hpp"

namespace warp {

inline constexpr uint32_t kPositionBlockDocs = 128;
inline constexpr uint32_t kPositionChunkDocs = 1u << 14;
inline constexpr uint64_t kPositionChunkPositions = uint64_t{1} << 18;

// Where the chunks of the partition [begin, begin + lengths.size()) begin, `lengths` its
// documents' (analyzed terms, each a position): a chunk ends before the document that would take
// it past kPositionChunkDocs documents or kPositionChunkPositions positions. One for an empty
// partition.
std::vector<DocId> position_chunk_begins(DocId begin, std::span<const uint32_t> lengths);

// The key of `term`'s row in the chunk that begins at docID `chunk_begin`: the chunk big-endian,
// then the term, so a chunk's rows are contiguous (a slice's file holds its chunk alone).
std::string position_key(DocId chunk_begin, std::string_view term);

// One block of a term's row, decoded: docs[i] holds the term starts[i+1] - starts[i] times, at the
// positions of(i) gives (decoding the groups that hold them the first time they are asked for).
class PositionBlock {
 public:
  std::vector<DocId> docs;
  std::vector<uint32_t> starts;
  // Throws Error where the row's bytes for them are damaged.
  std::span<const uint32_t> of(size_t i);

 private:
  friend class TermPositionsRow;
  std::string_view groups_;          // the block's position groups
  std::vector<uint32_t> group_at_;   // each group's first byte in groups_, and one past the last
  std::vector<uint32_t> raw_;        // the groups' values as stored, those decoded
  std::vector<uint8_t> decoded_;     // by group
  std::vector<uint32_t> positions_;  // of(i)'s answer
};

// A term's row in a chunk: `docs` ascending (each at least chunk_begin), `starts` one more than
// `docs` (from 0), `positions` ascending within each document.
std::string encode_term_positions(DocId chunk_begin, std::span<const DocId> docs, std::span<const uint32_t> starts,
                                  std::span<const uint32_t> positions);

// A row read back. parse() checks its table; decode() each block's streams as it reads them. Both
// throw Error on a row that does not hold together (a damaged partition).
class TermPositionsRow {
 public:
  static TermPositionsRow parse(std::string_view row, DocId chunk_begin);
  uint32_t doc_count() const { return docs_; }
  uint64_t position_count() const { return positions_; }
  size_t blocks() const { return block_last_.size(); }
  DocId last_doc(size_t block) const { return block_last_[block]; }
  void decode(size_t block, PositionBlock& out) const;

 private:
  std::string_view row_;
  DocId chunk_begin_ = 0;
  uint32_t docs_ = 0;
  uint64_t positions_ = 0;
  std::vector<DocId> block_last_;
  std::vector<size_t> block_at_;  // each block's first byte in row_, and one past the last
};

// A row as read: its bytes, and what keeps them valid (a pinned RocksDB block; nothing for a row
// held in memory).
struct PositionRow {
  std::string_view bytes;
  std::shared_ptr<const void> keep;
};

// A partition's word positions, wherever they live (a partition's family on disk, a build's or a
// live segment's memory). Thread-safe for reading.
class WordPositions {
 public:
  virtual ~WordPositions() = default;
  // The docIDs where the chunks begin, ascending.
  virtual const std::vector<DocId>& chunks() const = 0;
  // `term`'s row in the chunk beginning at `chunk`; false where no document there holds it.
  virtual bool row(DocId chunk, std::string_view term, PositionRow& out) const = 0;
  // Every row, by key (position_key) ascending.
  virtual void for_each_row(const std::function<void(std::string_view key, std::string_view row)>& visit) const = 0;
};

class InMemoryPositions : public WordPositions {
 public:
  InMemoryPositions(std::vector<DocId> chunks, std::map<std::string, std::string> rows)
      : chunks_(std::move(chunks)), rows_(std::move(rows)) {}
  const std::vector<DocId>& chunks() const override { return chunks_; }
  bool row(DocId chunk, std::string_view term, PositionRow& out) const override;
  void for_each_row(const std::function<void(std::string_view key, std::string_view row)>& visit) const override;
  uint64_t bytes() const;

 private:
  std::vector<DocId> chunks_;
  std::map<std::string, std::string> rows_;
};

// The positions of one chunk's documents, added in docID order, encoded by rows().
class PositionsBuilder {
 public:
  PositionsBuilder(const AnalyzerConfig& analyzer, DocId chunk_begin);
  PositionsBuilder(PositionsBuilder&&) noexcept;
  ~PositionsBuilder();
  // The document's title and body analyzed (as an index build analyzes them).
  void add(DocId doc, std::string_view title, std::string_view body);
  // The title and body of a document's stored form (stored_source.hpp): a JSON object's "title"
  // and "body" (either may be missing).
  void add_source(DocId doc, std::string_view source);
  // Already analyzed.
  void add_terms(DocId doc, std::span<const std::string> title, std::span<const std::string> body);
  // Already analyzed, each word in order as an index into `terms` (a LoggedWrite's tokens): the
  // first `title_words` the title's, the rest the body's.
  void add_tokens(DocId doc, std::span<const std::pair<std::string, uint32_t>> terms, std::span<const uint32_t> tokens,
                  uint32_t title_words);
  DocId chunk_begin() const { return chunk_begin_; }
  uint64_t position_count() const { return position_count_; }
  // Every term's row (key, value), keys ascending.
  void rows(const std::function<void(const std::string& key, const std::string& row)>& visit) const;
  std::map<std::string, std::string> rows() const;

 private:
  struct TermList {
    std::vector<DocId> docs;
    std::vector<uint32_t> starts{0};
    std::vector<uint32_t> positions;
  };
  void add_term(DocId doc, const std::string& term, uint32_t position);
  void check_order(DocId doc);

  AnalyzerConfig config_;
  std::unique_ptr<Analyzer> analyzer_;  // made at the first text to analyze
  DocId chunk_begin_;
  std::optional<DocId> last_doc_;
  std::unordered_map<std::string, TermList> terms_;  // ordered by rows()
  std::vector<std::string> scratch_;
  uint64_t position_count_ = 0;
};

// The positions of the documents [begin, begin + lengths.size()), `add(doc, builder)` adding each
// one's words to the builder of its chunk (position_chunk_begins).
std::shared_ptr<const InMemoryPositions> positions_of(const AnalyzerConfig& analyzer, DocId begin,
                                                      std::span<const uint32_t> lengths,
                                                      const std::function<void(DocId, PositionsBuilder&)>& add);
// The same, `source(doc)` giving each one's stored form.
std::shared_ptr<const InMemoryPositions> positions_of_sources(const AnalyzerConfig& analyzer, DocId begin,
                                                              std::span<const uint32_t> lengths,
                                                              const std::function<std::string_view(DocId)>& source);

// The meta row naming a partition's chunks ("0 4096 8192"), and back (throws Error when malformed).
std::string position_chunks_text(const std::vector<DocId>& chunks);
std::vector<DocId> parse_position_chunks(std::string_view text);

}  // namespace warp
