// libFuzzer: input files as the indexer reads them: the bytes as JSONL, TREC SGML, WARC and, gzip-
// compressed, as a WARC.gz (so the record parser runs behind the decompressor too), plus the raw
// bytes named .warc.gz (a broken gzip stream). Bad records must be skipped and counted, never
// crash; every document kept has an id.
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "indexer/reader/document_reader.hpp"

namespace {

void write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string gzip(const std::string& bytes) {
  z_stream stream{};
  deflateInit2(&stream, 1, Z_DEFLATED, 15 + 16, 1, Z_DEFAULT_STRATEGY);  // small state: cheap per input
  std::string out(deflateBound(&stream, bytes.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    // In memory where /dev/shm exists: the readers open paths, and a disk write per input is slow.
    const std::filesystem::path shm = "/dev/shm";
    const auto parent = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
    auto d = parent / ("warp-fuzz-readers-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path remove_at_exit = d;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(remove_at_exit, ignored);
    });
    return d;
  }();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  write(dir / "in.jsonl", bytes);
  write(dir / "in.trec", bytes);
  write(dir / "in.warc", bytes);
  write(dir / "in.warc.gz", gzip(bytes));
  write(dir / "raw.warc.gz", bytes);
  for (const char* name : {"in.jsonl", "in.trec", "in.warc", "in.warc.gz", "raw.warc.gz"}) {
    warp::ReadReport report;
    try {
      for (const warp::SourceDocument& doc : warp::read_documents({(dir / name).string()}, report)) {
        if (doc.external_id.empty()) std::abort();
      }
    } catch (const std::exception&) {
      // an unreadable file (a broken gzip stream) is an error with its reason: fine
    }
  }
  return 0;
}
