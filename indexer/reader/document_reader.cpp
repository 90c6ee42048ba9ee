#include "indexer/reader/document_reader.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <unordered_map>

#include "common/util/utf8.hpp"
#include "common/util/status.hpp"
#include "indexer/reader/input_source.hpp"
#include "indexer/reader/markup.hpp"

namespace warp {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool known_extension(const std::string& name) {
  for (std::string_view ext : {".jsonl", ".trec", ".sgml", ".trectext", ".warc", ".jsonl.gz", ".trec.gz", ".sgml.gz",
                               ".trectext.gz", ".warc.gz"}) {
    if (ends_with(name, ext)) return true;
  }
  return false;
}

// The four fields of a JSONL record (id, title, body, url). A field must be a string if present
// (null counts as absent); integers are accepted and written in decimal. As with a tree, the last
// of repeated keys wins, and a record is checked (object? id? each field's type?) only once the
// whole line parsed. Two parsers: simdjson's (SIMD validation and a tape, no tree of allocations)
// reads the lines it can; a line it refuses, or one with an integer beyond 64 bits (a number to
// nlohmann, an error to simdjson), or a very long one (simdjson's buffers grow to the longest
// line), goes through nlohmann's SAX events, whose verdicts and messages the errors keep. On one
// thread the JSON lexer and its byte-at-a-time appends were ~15% of a build (tests/bench/results/indexing.md).
class RecordFields final : public nlohmann::json_sax<nlohmann::json> {
 public:
  static constexpr std::array<const char*, 4> kNames = {"id", "title", "body", "url"};
  enum class Kind { kAbsent, kText, kNotText };

  // Parses `line` (it may grow its capacity, never its text); throws Error naming the first
  // problem, as the checks before did.
  void parse(std::string& line, SourceDocument& doc) {
    for (Field& f : fields_) f.kind = Kind::kAbsent, f.text.clear();
    // simdjson validates the line's UTF-8 as it parses (a separate pass over every line was 2.8%
    // of a one-thread build): only a line it refuses is checked, and invalid bytes are replaced by
    // U+FFFD before it is parsed again, so the record is kept.
    if (!parse_simd(line)) {
      if (utf8_valid(line)) {
        parse_sax(line);
      } else {
        line = utf8_sanitize(line);
        if (!parse_simd(line)) parse_sax(line);
      }
    }
    std::string* out[4] = {&doc.external_id, &doc.title, &doc.body, &doc.url};
    for (size_t i = 0; i < 4; ++i) {
      if (fields_[i].kind == Kind::kNotText) throw Error(std::string("\"") + kNames[i] + "\" is not a string");
      if (i == 0 && fields_[0].kind == Kind::kAbsent) throw Error("missing \"id\"");
      if (i == 0 && fields_[0].text.empty()) throw Error("empty \"id\"");
      out[i]->swap(fields_[i].text);
    }
  }

  // nlohmann's SAX events: the fallback, and the judge of malformed lines.
  void parse_sax(std::string& line) {
    for (Field& f : fields_) f.kind = Kind::kAbsent, f.text.clear();
    depth_ = 0, current_ = -1, object_ = false, first_ = true, error_.clear();
    if (!nlohmann::json::sax_parse(line, this)) throw Error("malformed JSON: " + error_);
    if (!object_) throw Error("not a JSON object");
  }

  // simdjson; false where the line is left to parse_sax. Its input needs SIMDJSON_PADDING readable
  // bytes past the text: the line's own capacity, reserved once for the longest line.
  bool parse_simd(std::string& line) {
    if (line.size() > kSimdLineMax) return false;
    if (line.capacity() - line.size() < simdjson::SIMDJSON_PADDING)
      line.reserve(line.size() + simdjson::SIMDJSON_PADDING);
    simdjson::dom::element root;
    if (simd_.parse(line).get(root) != simdjson::SUCCESS) return false;
    simdjson::dom::object object;
    if (root.get_object().get(object) != simdjson::SUCCESS) throw Error("not a JSON object");
    for (const simdjson::dom::key_value_pair field : object) {
      int i = 0;
      while (i < 4 && field.key != kNames[i]) ++i;
      if (i == 4) continue;
      Field& f = fields_[i];
      switch (field.value.type()) {
        case simdjson::dom::element_type::STRING: {
          const std::string_view text = field.value.get_string().value_unsafe();
          f.kind = Kind::kText, f.text.assign(text.data(), text.size());
          break;
        }
        case simdjson::dom::element_type::INT64:
          f.kind = Kind::kText, f.text = std::to_string(field.value.get_int64().value_unsafe());
          break;
        case simdjson::dom::element_type::UINT64:  // as the tree's get<int64_t>()
          f.kind = Kind::kText, f.text = std::to_string(static_cast<int64_t>(field.value.get_uint64().value_unsafe()));
          break;
        case simdjson::dom::element_type::NULL_VALUE:
          f.kind = Kind::kAbsent, f.text.clear();
          break;
        default:
          f.kind = Kind::kNotText, f.text.clear();
      }
    }
    return true;
  }

  bool null() override { return set(Kind::kAbsent, nullptr); }
  bool boolean(bool) override { return set(Kind::kNotText, nullptr); }
  bool number_integer(number_integer_t value) override {
    std::string text = std::to_string(value);
    return set(Kind::kText, &text);
  }
  bool number_unsigned(number_unsigned_t value) override {
    std::string text = std::to_string(static_cast<int64_t>(value));  // as the tree's get<int64_t>()
    return set(Kind::kText, &text);
  }
  bool number_float(number_float_t, const string_t&) override { return set(Kind::kNotText, nullptr); }
  bool string(string_t& value) override { return set(Kind::kText, &value); }
  bool binary(binary_t&) override { return set(Kind::kNotText, nullptr); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return --depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& name) override {
    if (depth_ == 1) {
      current_ = -1;
      for (int i = 0; i < 4; ++i) {
        if (name == kNames[i]) current_ = i;
      }
    }
    return true;
  }
  // nlohmann quotes everything it read of the bad token ("last read: '…'"): a string missing its
  // closing quote is the rest of the line, kilobytes in one log line. Its last kQuoted bytes say
  // where it went wrong.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    static constexpr std::string_view kLastRead = "last read: '";
    static constexpr size_t kQuoted = 80;
    const size_t quote = error_.find(kLastRead);
    if (quote != std::string::npos && error_.size() > quote + kLastRead.size() + kQuoted + 1) {
      error_ = error_.substr(0, quote + kLastRead.size()) + "…" + error_.substr(error_.size() - kQuoted - 1);
    }
    return false;
  }

 private:
  struct Field {
    Kind kind = Kind::kAbsent;
    std::string text;
  };
  // A value: the top-level one (not an object), or at depth 1 the named field's.
  bool set(Kind kind, std::string* text) {
    first_ = false;
    if (depth_ == 1 && current_ >= 0) {
      fields_[current_].kind = kind;
      if (text != nullptr) fields_[current_].text.swap(*text);
      current_ = -1;
    }
    return true;
  }
  bool open(bool is_object) {
    if (first_) object_ = is_object;
    set(Kind::kNotText, nullptr);
    ++depth_;
    return true;
  }

  static constexpr size_t kSimdLineMax = size_t{4} << 20;
  simdjson::dom::parser simd_;
  Field fields_[4];
  int depth_ = 0, current_ = -1;
  bool object_ = false, first_ = true;
  std::string error_;
};

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
        if (entry.is_regular_file() && known_extension(entry.path().filename().string()))
          found.push_back(entry.path().string());
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

// A reader of one format over a whole file or a split. Whole files report rejections to the
// stream's ReadReport with their file line; splits collect them with split lines (`deferred`).
class DocumentStream::FileReader {
 public:
  FileReader(const InputSplit& split, ReadReport& report, std::vector<Rejection>* deferred)
      : source_(split.path, split.begin),
        end_(split.end),
        skip_to_record_(split.begin > 0),
        report_(report),
        deferred_(deferred) {}
  virtual ~FileReader() = default;
  virtual bool next(SourceDocument& document) = 0;
  uint64_t offset() const { return source_.offset(); }
  uint64_t lines_in_split() const { return lines_in_split_; }

 protected:
  // The next line, counted in the split when it starts inside it.
  bool read_line(std::string& line) {
    if (!source_.read_line(line)) return false;
    if (source_.line_start() < end_) ++lines_in_split_;
    return true;
  }
  // Whether the next line starts inside the split.
  bool inside() const { return source_.offset() < end_; }
  void reject_line(uint64_t line, const std::string& why) {
    if (deferred_ != nullptr) {
      ++report_.rejected;
      deferred_->push_back({line, 0, why});
    } else {
      report_.reject(source_.path() + ":" + std::to_string(line), why);
    }
  }
  void reject_at(uint64_t offset, const std::string& why) {
    if (deferred_ != nullptr) {
      ++report_.rejected;
      deferred_->push_back({0, offset, why});
    } else {
      report_.reject(source_.path() + "@" + std::to_string(offset), why);
    }
  }
  InputSource source_;
  uint64_t end_;
  bool skip_to_record_;  // a split that starts inside the file: its first lines may end a record of the split before
  ReadReport& report_;

 private:
  std::vector<Rejection>* deferred_;
  uint64_t lines_in_split_ = 0;
};

namespace {

class JsonlReader final : public DocumentStream::FileReader {
 public:
  using FileReader::FileReader;
  bool next(SourceDocument& doc) override {
    std::string& line = line_;  // one buffer for every line: no allocation per record
    while (inside() && read_line(line)) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are not records
      try {  // invalid UTF-8 is replaced, the record kept (RecordFields::parse)
        fields_.parse(line, doc);
        // Kept as given (its invalid UTF-8 replaced), for the partition's stored family.
        const size_t first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
        doc.source.assign(line, first, last - first + 1);
        return true;
      } catch (const Error& e) {
        reject_line(source_.line_number(), e.what());
      }
    }
    return false;
  }

 private:
  std::string line_;
  RecordFields fields_;
};

// TREC SGML: <DOC> … <DOCNO>id</DOCNO> … </DOC>; the title from <TITLE> or <HEADLINE>. A split
// holds the documents whose <DOC> line starts inside it, and reports text outside <DOC>…</DOC> up
// to the next <DOC>, where the next split begins reading (silently skipping its first lines, which
// end a document of this split or were reported by it).
class TrecReader final : public DocumentStream::FileReader {
 public:
  using FileReader::FileReader;
  bool next(SourceDocument& doc) override {
    std::string line, record;
    uint64_t start_line = 0;
    bool inside_doc = false;
    // A document on one line ("<DOC><DOCNO>…</DOCNO>…</DOC>") ends where it begins.
    const auto ended_on_its_line = [&] {
      const size_t end = record.find("</DOC>");
      if (end == std::string::npos) return false;
      record.resize(end);
      inside_doc = false;
      return true;
    };
    if (skip_to_record_) {
      skip_to_record_ = false;
      if (!skip_to_next_doc(line)) return false;
      if (!begin_doc(line, record, start_line)) return false;
      inside_doc = true;
      if (ended_on_its_line() && parse(record, doc, start_line)) return true;
    }
    while (read_line(line)) {
      const std::string text = trim(line);
      if (!inside_doc) {
        if (text.rfind("<DOC>", 0) == 0) {
          if (!begin_doc(line, record, start_line)) return false;
          inside_doc = true;
        } else if (!text.empty()) {
          reject_line(source_.line_number(), "text outside <DOC>…</DOC>");
          if (!skip_to_next_doc(line) || !begin_doc(line, record, start_line)) return false;
          inside_doc = true;
        }
        if (ended_on_its_line() && parse(record, doc, start_line)) return true;
        continue;
      }
      if (text.rfind("<DOC>", 0) == 0) {  // a new document before </DOC>: the previous one is broken
        reject_line(start_line, "<DOC> without </DOC>");
        if (!begin_doc(line, record, start_line)) return false;
        if (ended_on_its_line() && parse(record, doc, start_line)) return true;
        continue;
      }
      const size_t end = text.find("</DOC>");
      if (end == std::string::npos) {
        record += line + "\n";
        continue;
      }
      record += text.substr(0, end);
      inside_doc = false;
      if (parse(record, doc, start_line)) return true;
    }
    if (inside_doc) reject_line(start_line, "<DOC> without </DOC> at the end of the file");
    return false;
  }

 private:
  // Starts the record of a <DOC> line, unless the line starts past the split (then it is the next
  // split's, and this split ends).
  bool begin_doc(const std::string& line, std::string& record, uint64_t& start_line) {
    if (source_.line_start() >= end_) return false;
    start_line = source_.line_number();
    record = trim(line).substr(5) + "\n";
    return true;
  }

  bool skip_to_next_doc(std::string& line) {
    while (read_line(line)) {
      if (trim(line).rfind("<DOC>", 0) == 0) return true;
    }
    line.clear();
    return false;
  }

  bool parse(const std::string& record, SourceDocument& doc, uint64_t start_line) {
    doc.source.clear();  // stored as its fields (stored_source)
    doc.external_id = first_element_text(record, "docno");
    if (doc.external_id.empty()) {
      reject_line(start_line, "document without <DOCNO>");
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
        if (!skipping_) reject_at(record_offset, "expected a WARC/ version line");
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
        reject_at(record_offset, "WARC headers truncated at the end of the file");
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
        reject_at(record_offset, "WARC record without a valid Content-Length");
        skipping_ = true;  // its content is skipped up to the next version line, silently
        continue;
      }
      std::string content;
      if (source_.read_bytes(length, content) < length) {
        reject_at(record_offset, "WARC record truncated: " + std::to_string(content.size()) + " of " +
                                     std::to_string(length) + " content bytes");
        return false;
      }
      const std::string type = headers.count("warc-type") ? headers["warc-type"] : "";
      if (type != "response" && type != "resource" && type != "conversion") continue;
      doc.source.clear();  // stored as its fields (stored_source)
      doc.external_id = headers.count("warc-trec-id") ? headers["warc-trec-id"] : headers["warc-record-id"];
      if (doc.external_id.empty()) {
        reject_at(record_offset, "WARC record without WARC-Record-ID");
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

namespace {
std::unique_ptr<DocumentStream::FileReader> make_reader(const InputSplit& split, ReadReport& report,
                                                        std::vector<Rejection>* deferred) {
  switch (split.format) {
    case InputFormat::kJsonl:
      return std::make_unique<JsonlReader>(split, report, deferred);
    case InputFormat::kTrec:
      return std::make_unique<TrecReader>(split, report, deferred);
    case InputFormat::kWarc:
      return std::make_unique<WarcReader>(split, report, deferred);
  }
  return nullptr;
}

bool gzip_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return magic[0] == 0x1f && magic[1] == 0x8b;
}
}  // namespace

std::vector<InputSplit> plan_splits(const std::vector<std::string>& files, uint64_t split_bytes) {
  std::vector<InputSplit> splits;
  split_bytes = std::max<uint64_t>(split_bytes, 1);
  for (size_t f = 0; f < files.size(); ++f) {
    const InputFormat format = detect_format(files[f]);
    const uint64_t size = fs::file_size(files[f]);
    if (format == InputFormat::kWarc || size <= split_bytes || gzip_file(files[f])) {
      splits.push_back({files[f], format, 0, UINT64_MAX, f});
      continue;
    }
    for (uint64_t begin = 0; begin < size; begin += split_bytes) {
      splits.push_back({files[f], format, begin, begin + split_bytes >= size ? UINT64_MAX : begin + split_bytes, f});
    }
  }
  return splits;
}

SplitReader::SplitReader(const InputSplit& split)
    : begin_(split.begin), reader_(make_reader(split, report_, &rejections_)) {}
SplitReader::~SplitReader() = default;
bool SplitReader::next(SourceDocument& document) {
  if (done_) return false;  // a reader past its split's end must not read on
  done_ = !reader_->next(document);
  return !done_;
}
uint64_t SplitReader::lines() const { return reader_->lines_in_split(); }
uint64_t SplitReader::bytes_read() const { return reader_->offset() - begin_; }

DocumentStream::DocumentStream(const std::vector<std::string>& paths) : files_(expand_input_paths(paths)) {
  for (const std::string& file : files_) total_file_bytes_ += fs::file_size(file);
}

DocumentStream::~DocumentStream() = default;

bool DocumentStream::next(SourceDocument& document) {
  for (;;) {
    if (current_ == nullptr) {
      if (next_file_ >= files_.size()) return false;
      const std::string& path = files_[next_file_++];
      current_ = make_reader({path, detect_format(path)}, report_, nullptr);
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
