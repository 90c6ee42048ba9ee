// The write API: documents put and deleted through the broker, sent to the indexer's write log
// (index_writer.hpp) and answered once durable there; they are searchable once the indexer has
// folded them into a generation and the leaves serve it (docs/api.md, "Writing documents").
//   POST   /indexes/default/documents       NDJSON, one document a line: an answer per line, in order
//   PUT    /indexes/default/documents/{id}  one document (its "id", if given, must be {id})
//   DELETE /indexes/default/documents/{id}
//   GET    /indexes/default                 the write log's sequence and what the latest generation holds
// A document is a JSON object with "id" (a non-empty string) and any of "title", "body", "url"
// (strings, the text indexed); other fields are kept in its stored form, unindexed. A document
// nested more than 32 levels deep is refused, per line. Every answer carries the sequence of its
// writes.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "broker/index_writer.hpp"
#include "common/http/http_server.hpp"

namespace warp {

struct DocumentApiOptions {
  size_t max_document_bytes = 1u << 20;  // one document (a line); past it, 413 for that line
  size_t max_documents = 10000;          // lines in one request; past it, 413 for the request
};

class DocumentApi {
 public:
  DocumentApi(DocumentApiOptions options, IndexWriter& writer) : options_(options), writer_(writer) {}
  // Whether `path` is the write API's (under /indexes/).
  static bool serves(const std::string& path) { return path.rfind("/indexes/", 0) == 0 || path == "/indexes"; }
  // The id of /indexes/default/documents/{id}; nullopt for any other path.
  static std::optional<std::string> document_path_id(const std::string& path);
  void handle(const http::Request& request, http::Respond respond);

 private:
  void bulk(const http::Request& request, http::Respond respond);
  void one(const http::Request& request, const std::string& id, http::Respond respond);
  DocumentApiOptions options_;
  IndexWriter& writer_;
};

// A document as the write API takes it, checked and written again as one JSON line (its id the
// path's where one is given, every field kept); or the reason it is refused. `path_id`: the id the URL names
// ("" in a bulk request).
struct CheckedDocument {
  std::string id, line, error;
  int status = 200;  // 400 or 413 with `error`
};
CheckedDocument check_document(std::string_view text, const std::string& path_id, size_t max_bytes);

}  // namespace warp
