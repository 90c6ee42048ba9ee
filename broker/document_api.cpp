#include "broker/document_api.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace warp {
namespace {

http::Response json_answer(int status, const nlohmann::json& body,
                           std::vector<std::pair<std::string, std::string>> headers = {}) {
  return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          std::move(headers)};
}

http::Response error(int status, const std::string& message) { return json_answer(status, {{"error", message}}); }

// The answer for an indexer that could not take the writes.
http::Response refused(const WriteOutcome& outcome) {
  if (outcome.full)
    return error(507, "the indexer's disk is full: nothing of this request was kept (" + outcome.error + ")");
  if (outcome.behind) {
    http::Response answer = error(429, outcome.error);
    answer.headers.emplace_back("Retry-After", "1");
    return answer;
  }
  if (outcome.unavailable) {
    http::Response answer = error(503, outcome.error);
    answer.headers.emplace_back("Retry-After", "1");
    return answer;
  }
  return error(500, outcome.error);
}

// What write `i` of a request did, as the indexer said ("created", "replaced", "deleted",
// "not_found"); without its word, "put" or "deleted".
std::string result_name(const WriteOutcome& outcome, size_t i, bool put) {
  static const char* const kNames[] = {"", "created", "replaced", "deleted", "not_found"};
  if (i < outcome.results.size() && outcome.results[i] >= 1 && outcome.results[i] <= 4)
    return kNames[outcome.results[i]];
  return put ? "put" : "deleted";
}

// Objects and arrays within objects and arrays: a document nested deeper is refused (everything
// downstream, the indexer's log reader and the leaves' fetches, then parses a bounded document).
constexpr size_t kMaxDepth = 32;
size_t depth_of(const nlohmann::json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::json*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    deepest = std::max(deepest, depth);
    if (depth > kMaxDepth) break;
    if (value->is_structured())
      for (const auto& child : *value)
        if (child.is_structured()) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

}  // namespace

CheckedDocument check_document(std::string_view text, const std::string& path_id, size_t max_bytes) {
  CheckedDocument out;
  const auto refuse = [&](int status, std::string why) {
    out.status = status;
    out.error = std::move(why);
    return out;
  };
  if (text.size() > max_bytes)
    return refuse(
        413, "a document of " + std::to_string(text.size()) + " bytes (at most " + std::to_string(max_bytes) + ")");
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return refuse(400, "not a JSON object");
  if (depth_of(doc) > kMaxDepth) return refuse(400, "nested more than " + std::to_string(kMaxDepth) + " levels deep");
  // id, title, body and url are what is indexed: strings. Any other field is kept as it is, in the
  // stored document (what a fetch returns), as a JSONL input's are.
  nlohmann::json clean = nlohmann::json::object();
  for (auto& [key, value] : doc.items()) {
    const bool indexed = key == "id" || key == "title" || key == "body" || key == "url";
    if (indexed && !value.is_string()) return refuse(400, "\"" + key + "\" is not a string");
    clean[key] = value;
  }
  if (!path_id.empty()) {
    if (clean.contains("id") && clean["id"] != path_id)
      return refuse(400, "the document's id is not the one in the path");
    clean["id"] = path_id;
  }
  if (!clean.contains("id") || clean["id"].get_ref<const std::string&>().empty())
    return refuse(400, "a document needs a non-empty \"id\"");
  out.id = clean["id"].get<std::string>();
  if (out.id.size() > 512) return refuse(400, "an id of more than 512 bytes");
  out.line = clean.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

std::optional<std::string> DocumentApi::document_path_id(const std::string& path) {
  static const std::string kPrefix = "/indexes/default/documents/";
  if (path.size() <= kPrefix.size() || path.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  return path.substr(kPrefix.size());
}

void DocumentApi::handle(const http::Request& request, http::Respond respond) {
  // /indexes/{name}[/documents[/{id}]]
  std::string rest = request.path.size() > 9 ? request.path.substr(9) : "";
  const size_t slash = rest.find('/');
  const std::string name = rest.substr(0, slash);
  rest = slash == std::string::npos ? "" : rest.substr(slash);
  if (name != "default")
    return respond(error(404, "no index named \"" + name + "\": this cluster serves one index, \"default\""));
  if (rest.empty() || rest == "/") {
    if (request.method != "GET") return respond(error(405, "use GET on /indexes/default"));
    return writer_.write({}, [respond](const WriteOutcome& outcome) {
      if (!outcome.error.empty()) return respond(refused(outcome));
      respond(json_answer(200, {{"name", "default"},
                                {"write_sequence", outcome.last_sequence},
                                {"folded_sequence", outcome.folded_sequence}}));
    });
  }
  if (rest == "/documents") {
    if (request.method != "POST") return respond(error(405, "use POST with NDJSON on /indexes/default/documents"));
    return bulk(request, std::move(respond));
  }
  if (rest.rfind("/documents/", 0) == 0 && rest.size() > 11) return one(request, rest.substr(11), std::move(respond));
  respond(error(404, "no such endpoint: " + request.path));
}

void DocumentApi::bulk(const http::Request& request, http::Respond respond) {
  nlohmann::json items = nlohmann::json::array();
  std::vector<DocumentWrite> writes;
  std::vector<size_t> item_of;  // writes[i] answers items[item_of[i]]
  size_t line_number = 0;
  for (size_t at = 0; at < request.body.size();) {
    size_t end = request.body.find('\n', at);
    if (end == std::string::npos) end = request.body.size();
    std::string_view line(request.body.data() + at, end - at);
    at = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines: nothing
    if (items.size() >= options_.max_documents)
      return respond(error(413, "more than " + std::to_string(options_.max_documents) + " documents in one request"));
    CheckedDocument checked = check_document(line, "", options_.max_document_bytes);
    if (!checked.error.empty()) {
      items.push_back({{"line", line_number}, {"status", checked.status}, {"error", checked.error}});
      continue;
    }
    item_of.push_back(items.size());
    items.push_back({{"line", line_number}, {"id", checked.id}});
    writes.push_back({true, std::move(checked.id), std::move(checked.line)});
  }
  if (writes.empty()) {
    const bool any = !items.empty();
    return respond(json_answer(
        any ? 200 : 400,
        any ? nlohmann::json{{"errors", true}, {"items", items}}
            : nlohmann::json{{"error", "no documents in the request body (NDJSON: one JSON object a line)"}}));
  }
  const size_t count = writes.size();
  const bool errors = count != items.size();
  writer_.write(std::move(writes), [respond, items = std::move(items), item_of = std::move(item_of), count,
                                    errors](const WriteOutcome& outcome) mutable {
    if (!outcome.error.empty()) return respond(refused(outcome));
    const uint64_t first = outcome.last_sequence - count + 1;
    for (size_t i = 0; i < item_of.size(); ++i) {
      items[item_of[i]]["result"] = result_name(outcome, i, true);
      items[item_of[i]]["sequence"] = first + i;
    }
    respond(json_answer(200, {{"sequence", outcome.last_sequence}, {"errors", errors}, {"items", items}}));
  });
}

void DocumentApi::one(const http::Request& request, const std::string& id, http::Respond respond) {
  if (id.size() > 512 || id.find('/') != std::string::npos) return respond(error(400, "not a document id: " + id));
  std::vector<DocumentWrite> writes;
  if (request.method == "PUT") {
    CheckedDocument checked = check_document(request.body, id, options_.max_document_bytes);
    if (!checked.error.empty()) return respond(error(checked.status, checked.error));
    writes.push_back({true, checked.id, std::move(checked.line)});
  } else if (request.method == "DELETE") {
    writes.push_back({false, id, ""});
  } else {
    http::Response refused_method = error(405, "use PUT or DELETE on a document");
    refused_method.headers.emplace_back("Allow", "PUT, DELETE");
    return respond(std::move(refused_method));
  }
  const bool put = writes[0].put;
  writer_.write(std::move(writes), [respond, id, put](const WriteOutcome& outcome) {
    if (!outcome.error.empty()) return respond(refused(outcome));
    // As HTTP has it: 201 for a document created, 404 for a delete that found none (it is logged
    // all the same: it keeps the id deleted wherever a copy might still arrive from).
    const std::string result = result_name(outcome, 0, put);
    const int status = result == "created" ? 201 : result == "not_found" ? 404 : 200;
    respond(json_answer(status, {{"id", id}, {"result", result}, {"sequence", outcome.last_sequence}}));
  });
}

}  // namespace warp
