// Buffered reading of a plain or gzip file (zlib reads both; concatenated gzip members, as in
// .warc.gz, are read through) by lines or by byte counts, tracking line number and offset. An
// uncompressed file can be read from a byte offset, so that threads read one large file in pieces.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <string>

namespace warp {

class InputSource {
 public:
  explicit InputSource(const std::string& path);  // throws Error when the file cannot be opened
  // An uncompressed file from the first line that starts at or after byte `begin` (the partial
  // line before it is skipped); line numbers count from there.
  InputSource(const std::string& path, uint64_t begin);
  ~InputSource();
  InputSource(const InputSource&) = delete;
  InputSource& operator=(const InputSource&) = delete;

  // The next line without its '\n' (and '\r'); false at the end of the file.
  bool read_line(std::string& line);
  // Appends up to n bytes; returns how many were read (fewer only at the end of the file).
  size_t read_bytes(size_t n, std::string& out);
  uint64_t line_number() const { return line_number_; }  // of the last line read
  uint64_t offset() const { return offset_; }            // uncompressed bytes consumed (from the file's start)
  uint64_t line_start() const { return line_start_; }    // offset of the last line read
  const std::string& path() const { return path_; }

 private:
  void open_whole();
  bool fill();

  std::string path_;
  gzFile file_ = nullptr;
  std::string buffer_;
  size_t chunk_ = 0;  // bytes asked of zlib per read: from the file's size up to 256 KiB
  size_t position_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
  uint64_t offset_ = 0;
  uint64_t line_start_ = 0;
};

}  // namespace warp
