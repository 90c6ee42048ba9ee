// Writes documents as TREC SGML or WARC (plain or gzip), to test the readers and the pipeline on
// the same documents in every input format.
#pragma once
#include <zlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/index/index_builder.hpp"

namespace warp::testing {

inline std::string escape_markup(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

inline void write_trec(const std::string& path, const std::vector<SourceDocument>& docs) {
  std::ofstream out(path);
  for (const auto& d : docs) {
    out << "<DOC>\n<DOCNO> " << d.external_id << " </DOCNO>\n<TITLE>" << escape_markup(d.title) << "</TITLE>\n<TEXT>\n"
        << escape_markup(d.body) << "\n</TEXT>\n</DOC>\n";
  }
}

inline std::string warc_record(const std::string& type, const std::string& id, const std::string& uri,
                               const std::string& content) {
  return "WARC/1.0\r\nWARC-Type: " + type + "\r\nWARC-Record-ID: <urn:uuid:" + id + ">\r\nWARC-TREC-ID: " + id +
         "\r\nWARC-Target-URI: " + uri +
         "\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: " + std::to_string(content.size()) +
         "\r\n\r\n" + content + "\r\n\r\n";
}

inline std::string warc_response(const SourceDocument& d) {
  const std::string html = "<html><head><title>" + escape_markup(d.title) + "</title></head><body><p>" +
                           escape_markup(d.body) + "</p></body></html>";
  return warc_record("response", d.external_id, "http://example.org/" + d.external_id,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + html);
}

// Writes a warcinfo record and one response per document; gzip: one gzip member per record.
inline void write_warc(const std::string& path, const std::vector<SourceDocument>& docs, bool gzip) {
  std::vector<std::string> records{warc_record("warcinfo", "info", "", "software: warpsearch tests\r\n")};
  for (const auto& d : docs) records.push_back(warc_response(d));
  if (!gzip) {
    std::ofstream out(path, std::ios::binary);
    for (const auto& r : records) out << r;
    return;
  }
  std::ofstream out(path, std::ios::binary);
  for (const auto& r : records) {
    gzFile member = gzopen((path + ".member").c_str(), "wb");
    gzwrite(member, r.data(), static_cast<unsigned>(r.size()));
    gzclose(member);
    std::ifstream in(path + ".member", std::ios::binary);
    out << in.rdbuf();
  }
  std::remove((path + ".member").c_str());
}

}  // namespace warp::testing
