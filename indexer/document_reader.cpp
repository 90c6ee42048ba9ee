#include "indexer/document_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/analysis/utf8.hpp"
#include "common/util/status.hpp"
#include "indexer/input_source.hpp"
#include "indexer/markup.hpp"

namespace warp {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool known_extension(const std::string& name) {
  for (std::string_view ext : {".jsonl", ".trec", ".sgml", ".trectext", ".warc", ".warc.gz"}) {
    if (ends_with(name, ext)) return true;
  }
  return false;
}

// A field that must be a string if present; integers are accepted as ids.
std::string text_field(const nlohmann::json& record, const char* name, bool required) {
  auto it = record.find(name);
  if (it == record.end() || it->is_null()) {
    if (required) throw Error(std::string("missing \"") + name + "\"");
    return {};
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  throw Error(std::string("\"") + name + "\" is not a string");
}

std::string trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

}  // namespace

std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (fs::is_directory(path)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        if (entry.is_regular_file() && known_extension(entry.path().filename().string())) found.push_back(entry.path().string());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(path)) {
      files.push_back(path);
    } else {
      throw Error("input " + path + ": no such file or directory");
    }
  }
  return files;
}

InputFormat detect_format(const std::string& path) {
  if (ends_with(path, ".jsonl")) return InputFormat::kJsonl;
  if (ends_with(path, ".warc") || ends_with(path, ".warc.gz")) return InputFormat::kWarc;
  if (ends_with(path, ".trec") || ends_with(path, ".sgml") || ends_with(path, ".trectext")) return InputFormat::kTrec;
  InputSource source(path);  // sniff the first line (decompressed)
  std::string line;
  while (source.read_line(line) && trim(line).empty()) {
  }
  const std::string start = trim(line);
  if (start.rfind("WARC/", 0) == 0) return InputFormat::kWarc;
  if (start.rfind("<DOC>", 0) == 0) return InputFormat::kTrec;
  return InputFormat::kJsonl;
}

class DocumentStream::FileReader {
 public:
  FileReader(const std::string& path, ReadReport& report) : source_(path), report_(report) {}
  virtual ~FileReader() = default;
  virtual bool next(SourceDocument& document) = 0;
  uint64_t offset() const { return source_.offset(); }

 protected:
  std::string line_where(uint64_t line) const { return source_.path() + ":" + std::to_string(line); }
  std::string byte_where(uint64_t offset) const { return source_.path() + "@" + std::to_string(offset); }
  InputSource source_;
  ReadReport& report_;
};

namespace {

class JsonlReader final : public DocumentStream::FileReader {
 public:
  using FileReader::FileReader;
  bool next(SourceDocument& doc) override {
    std::string line;
    while (source_.read_line(line)) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are not records
      if (!utf8_valid(line)) line = utf8_sanitize(line);  // keep the record, replace the bad bytes
      try {
        const nlohmann::json record = nlohmann::json::parse(line);
        if (!record.is_object()) throw Error("not a JSON object");
        doc.external_id = text_field(record, "id", true);
        if (doc.external_id.empty()) throw Error("empty \"id\"");
        doc.title = text_field(record, "title", false);
        doc.body = text_field(record, "body", false);
        doc.url = text_field(record, "url", false);
        return true;
      } catch (const nlohmann::json::exception& e) {
        report_.reject(line_where(source_.line_number()), std::string("malformed JSON: ") + e.what());
      } catch (const Error& e) {
        report_.reject(line_where(source_.line_number()), e.what());
      }
    }
    return false;
  }
};

// TREC SGML: <DOC> … <DOCNO>id</DOCNO> … </DOC>; the title from <TITLE> or <HEADLINE>.
class TrecReader final : public DocumentStream::FileReader {
 public:
  using FileReader::FileReader;
  bool next(SourceDocument& doc) override {
    std::string line, record;
    uint64_t start_line = 0;
    bool inside = false;
    while (source_.read_line(line)) {
      const std::string text = trim(line);
      if (!inside) {
        if (text.rfind("<DOC>", 0) == 0) {
          inside = true, start_line = source_.line_number(), record.clear();
          record += text.substr(5) + "\n";
        } else if (!text.empty()) {
          report_.reject(line_where(source_.line_number()), "text outside <DOC>…</DOC>");
          skip_to_next_doc(line);
          if (line.empty()) return false;
          inside = true, start_line = source_.line_number(), record.clear();
        }
        continue;
      }
      if (text.rfind("<DOC>", 0) == 0) {  // a new document before </DOC>: the previous one is broken
        report_.reject(line_where(start_line), "<DOC> without </DOC>");
        start_line = source_.line_number(), record.clear();
        continue;
      }
      const size_t end = text.find("</DOC>");
      if (end == std::string::npos) {
        record += line + "\n";
        continue;
      }
      record += text.substr(0, end);
      inside = false;
      if (parse(record, doc, start_line)) return true;
    }
    if (inside) report_.reject(line_where(start_line), "<DOC> without </DOC> at the end of the file");
    return false;
  }

 private:
  void skip_to_next_doc(std::string& line) {
    while (source_.read_line(line)) {
      if (trim(line).rfind("<DOC>", 0) == 0) return;
    }
    line.clear();
  }

  bool parse(const std::string& record, SourceDocument& doc, uint64_t start_line) {
    doc.external_id = first_element_text(record, "docno");
    if (doc.external_id.empty()) {
      report_.reject(line_where(start_line), "document without <DOCNO>");
      return false;
    }
    const char* title_tag = first_element_text(record, "title").empty() ? "headline" : "title";
    doc.title = first_element_text(record, title_tag);
    doc.url.clear();
    // The body: everything but the DOCNO and title elements (the title is indexed once, as title).
    doc.body = markup_to_text(without_element(without_element(record, "docno"), title_tag));
    return true;
  }
};

// WARC 1.0/1.1: "WARC/x" line, headers, blank line, Content-Length bytes, blank lines. Response,
// resource and conversion records become documents (HTTP headers stripped, HTML to text); others
// (warcinfo, request, metadata) are skipped without being counted as errors.
class WarcReader final : public DocumentStream::FileReader {
 public:
  using FileReader::FileReader;
  bool next(SourceDocument& doc) override {
    std::string line;
    for (;;) {
      uint64_t record_offset = source_.offset();
      if (!source_.read_line(line)) return false;
      if (trim(line).empty()) continue;
      if (line.rfind("WARC/", 0) != 0) {
        if (!skipping_) report_.reject(byte_where(record_offset), "expected a WARC/ version line");
        if (!resync(line, record_offset)) return false;
      }
      skipping_ = false;
      std::unordered_map<std::string, std::string> headers;
      bool headers_done = false;
      while (source_.read_line(line)) {
        if (line.empty()) {
          headers_done = true;
          break;
        }
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        headers[name] = trim(std::string_view(line).substr(colon + 1));
      }
      if (!headers_done) {
        report_.reject(byte_where(record_offset), "WARC headers truncated at the end of the file");
        return false;
      }
      auto length_header = headers.find("content-length");
      uint64_t length = 0;
      try {
        if (length_header == headers.end()) throw Error("missing");
        size_t used = 0;
        length = std::stoull(length_header->second, &used);
        if (used != length_header->second.size()) throw Error("bad");
      } catch (...) {
        report_.reject(byte_where(record_offset), "WARC record without a valid Content-Length");
        skipping_ = true;  // its content is skipped up to the next version line, silently
        continue;
      }
      std::string content;
      if (source_.read_bytes(length, content) < length) {
        report_.reject(byte_where(record_offset), "WARC record truncated: " + std::to_string(content.size()) + " of " +
                                                     std::to_string(length) + " content bytes");
        return false;
      }
      const std::string type = headers.count("warc-type") ? headers["warc-type"] : "";
      if (type != "response" && type != "resource" && type != "conversion") continue;
      doc.external_id = headers.count("warc-trec-id") ? headers["warc-trec-id"] : headers["warc-record-id"];
      if (doc.external_id.empty()) {
        report_.reject(byte_where(record_offset), "WARC record without WARC-Record-ID");
        continue;
      }
      doc.url = headers["warc-target-uri"];
      std::string_view payload = content;
      if (type == "response") {  // strip the HTTP status line and headers
        size_t body = payload.find("\r\n\r\n");
        size_t skip = 4;
        if (body == std::string_view::npos) body = payload.find("\n\n"), skip = 2;
        payload = body == std::string_view::npos ? std::string_view() : payload.substr(body + skip);
      }
      doc.title = first_element_text(payload, "title");
      doc.body = markup_to_text(element_or_all(payload, "body"));  // the title is indexed once, as title
      return true;
    }
  }

 private:
  bool skipping_ = false;

  // Skips to the next line starting with "WARC/"; false at the end of the file.
  bool resync(std::string& line, uint64_t& record_offset) {
    for (;;) {
      record_offset = source_.offset();
      if (!source_.read_line(line)) return false;
      if (line.rfind("WARC/", 0) == 0) return true;
    }
  }
};

}  // namespace

DocumentStream::DocumentStream(const std::vector<std::string>& paths) : files_(expand_input_paths(paths)) {
  for (const std::string& file : files_) total_file_bytes_ += fs::file_size(file);
}

DocumentStream::~DocumentStream() = default;

bool DocumentStream::next(SourceDocument& document) {
  for (;;) {
    if (current_ == nullptr) {
      if (next_file_ >= files_.size()) return false;
      const std::string& path = files_[next_file_++];
      switch (detect_format(path)) {
        case InputFormat::kJsonl: current_ = std::make_unique<JsonlReader>(path, report_); break;
        case InputFormat::kTrec: current_ = std::make_unique<TrecReader>(path, report_); break;
        case InputFormat::kWarc: current_ = std::make_unique<WarcReader>(path, report_); break;
      }
      file_base_bytes_ = report_.bytes;
    }
    const bool got = current_->next(document);
    report_.bytes = file_base_bytes_ + current_->offset();
    if (got) return true;
    current_.reset();
  }
}

std::vector<SourceDocument> read_documents(const std::vector<std::string>& paths, ReadReport& report,
                                           const std::function<void(const ReadReport&)>& on_progress) {
  DocumentStream stream(paths);
  std::vector<SourceDocument> documents;
  std::unordered_map<std::string, size_t> index_by_id;
  std::vector<bool> replaced;
  SourceDocument doc;
  while (stream.next(doc)) {
    auto [it, inserted] = index_by_id.try_emplace(doc.external_id, documents.size());
    if (!inserted) {
      replaced[it->second] = true;  // last one wins
      ++stream.report().replaced;
      it->second = documents.size();
    }
    documents.push_back(std::move(doc));
    replaced.push_back(false);
    if (on_progress && documents.size() % 20000 == 0) {
      stream.report().documents = documents.size() - stream.report().replaced;
      on_progress(stream.report());
    }
  }
  if (stream.report().replaced > 0) {
    size_t kept = 0;
    for (size_t i = 0; i < documents.size(); ++i) {
      if (replaced[i]) continue;
      if (kept != i) documents[kept] = std::move(documents[i]);  // never self-move: it empties strings
      ++kept;
    }
    documents.resize(kept);
  }
  stream.report().documents = documents.size();
  report = stream.report();
  return documents;
}

}  // namespace warp
