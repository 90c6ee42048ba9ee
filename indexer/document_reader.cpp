#include "indexer/document_reader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/analysis/utf8.hpp"
#include "common/util/status.hpp"

namespace warp {
namespace fs = std::filesystem;

std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (fs::is_directory(path)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        if (entry.is_regular_file() && entry.path().extension() == ".jsonl") found.push_back(entry.path().string());
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

namespace {

// A field that must be a string if present; numbers are accepted as ids.
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

}  // namespace

std::vector<SourceDocument> read_jsonl_documents(const std::vector<std::string>& paths, ReadReport& report,
                                                 const std::function<void(const ReadReport&)>& on_progress) {
  std::vector<SourceDocument> documents;
  std::unordered_map<std::string, size_t> index_by_id;
  std::vector<bool> replaced;
  const auto reject = [&](const std::string& where, const std::string& why) {
    ++report.rejected;
    if (report.errors.size() < 100) report.errors.push_back(where + ": " + why);
  };
  for (const std::string& path : expand_input_paths(paths)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("input " + path + ": cannot open");
    std::string line;
    uint64_t line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      report.bytes += line.size() + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are not records
      const std::string where = path + ":" + std::to_string(line_number);
      if (!utf8_valid(line)) line = utf8_sanitize(line);  // keep the record, replace the bad bytes
      SourceDocument doc;
      try {
        const nlohmann::json record = nlohmann::json::parse(line);
        if (!record.is_object()) throw Error("not a JSON object");
        doc.external_id = text_field(record, "id", true);
        if (doc.external_id.empty()) throw Error("empty \"id\"");
        doc.title = text_field(record, "title", false);
        doc.body = text_field(record, "body", false);
        doc.url = text_field(record, "url", false);
      } catch (const nlohmann::json::exception& e) {
        reject(where, std::string("malformed JSON: ") + e.what());
        continue;
      } catch (const Error& e) {
        reject(where, e.what());
        continue;
      }
      auto [it, inserted] = index_by_id.try_emplace(doc.external_id, documents.size());
      if (!inserted) {
        replaced[it->second] = true;  // last one wins
        ++report.replaced;
        it->second = documents.size();
      }
      documents.push_back(std::move(doc));
      replaced.push_back(false);
      if (on_progress && documents.size() % 20000 == 0) {
        report.documents = documents.size() - report.replaced;
        on_progress(report);
      }
    }
  }
  if (report.replaced > 0) {
    size_t kept = 0;
    for (size_t i = 0; i < documents.size(); ++i) {
      if (!replaced[i]) documents[kept++] = std::move(documents[i]);
    }
    documents.resize(kept);
  }
  report.documents = documents.size();
  return documents;
}

}  // namespace warp
