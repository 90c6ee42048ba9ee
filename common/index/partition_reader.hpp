// Reading a partition into memory (the layout: partition_store.hpp). open_partition checks every
// file against WARP-CHECKSUMS before RocksDB reads a byte, then the format version, the analyzer,
// each list's CRC and structure and the content CRC, and refuses, with a message naming the
// partition and the cause, anything that does not match; it then holds everything it serves in
// memory and closes the database.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/index/index_builder.hpp"
#include "common/index/index_view.hpp"

namespace warp {

// BM25 parameters to use instead of the partition's: block maxima are rescored for another k1 or
// b; k3 is query-time only.
struct Bm25Overrides {
  std::optional<float> k1, b, k3;
  Bm25Params applied_to(Bm25Params params) const {
    params.k1 = k1.value_or(params.k1);
    params.b = b.value_or(params.b);
    params.k3 = k3.value_or(params.k3);
    return params;
  }
};

struct OpenOptions {
  std::string expected_analyzer;  // empty: accept the partition's analyzer
  Bm25Overrides bm25;
  std::vector<uint32_t> partitions;  // open_index: only these partition ids (empty: all)
  // Term ranges of a partition read at once (0: one per core; open_index shares the cores among
  // the partitions it opens side by side).
  size_t threads = 0;
};

class Partition {
 public:
  ~Partition();
  const IndexView& view() const { return view_; }
  const std::string& path() const { return path_; }
  // Title, url and length of a document of this partition; nullopt when the docID lies outside
  // the partition. From memory: a RocksDB read for each of a reply's hits was a third of a leaf's
  // CPU per query (two block-cache lookups with their locks per Get; a MultiGet measured no less).
  std::optional<DocumentRecord> document(DocId doc) const;
  // The document's stored form (stored_source.hpp), read from the partition's stored family (a
  // RocksDB read: only for hits being fetched); nullopt outside the partition or where it keeps
  // none (built with --no-store, or before stored forms were kept). Thread-safe.
  std::optional<std::string> source(DocId doc) const;
  bool keeps_sources() const { return stored_family_ != nullptr; }
  // The docID of the document with this external id; nullopt when the partition has none. The map
  // behind it (about 40 bytes a document) is made at the first call. Thread-safe.
  std::optional<DocId> find(std::string_view external_id) const;
  using IdMap = std::unordered_map<std::string_view, DocId>;
  const IdMap& ids() const;  // external id -> docID, every document of the partition

  // The database kept open on the stored and positions families alone (its word positions hold it too).
  struct StoredFamily;

 private:
  friend std::unique_ptr<Partition> open_partition(const std::string& dir, const OpenOptions& options);
  Partition() = default;
  std::string path_;
  IndexView view_;
  std::string stored_;                           // each document's title, url and length as written, one after another
  std::vector<size_t> stored_ends_;              // where each document's part of stored_ ends
  std::shared_ptr<StoredFamily> stored_family_;  // null: no stored forms (word positions may share it)
  mutable std::once_flag ids_once_;
  mutable IdMap ids_;
};

std::unique_ptr<Partition> open_partition(const std::string& dir, const OpenOptions& options = {});

}  // namespace warp
