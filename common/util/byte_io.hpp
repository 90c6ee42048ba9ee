// Little-endian append/read helpers for the on-disk records (lexicon entries, list headers).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/status.hpp"

namespace warp {

class ByteWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void f64(double v) { raw(&v, 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
  }
  void raw(const void* p, size_t n) {
    if (n > 0) bytes_.append(static_cast<const char*>(p), n);  // an empty vector's data() may be null
  }
  template <class T>
  void array(const std::vector<T>& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(T));
  }
  const std::string& bytes() const { return bytes_; }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Reads what ByteWriter wrote; every read is bounds-checked and throws Error naming `what`.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint8_t u8() { return static_cast<uint8_t>(*take(1)); }
  uint32_t u32() { return pod<uint32_t>(); }
  uint64_t u64() { return pod<uint64_t>(); }
  float f32() { return pod<float>(); }
  double f64() { return pod<double>(); }
  std::string str() {
    uint32_t n = u32();
    return std::string(take(n), n);
  }
  template <class T>
  std::vector<T> array() {
    uint64_t n = u64();
    if (n > remaining() / sizeof(T)) fail();
    std::vector<T> v(n);
    const char* from = take(n * sizeof(T));
    if (n > 0) std::memcpy(v.data(), from, n * sizeof(T));  // memcpy to an empty vector's null data() is undefined
    return v;
  }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  template <class T>
  T pod() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const char* take(size_t n) {
    if (n > remaining()) fail();
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] void fail() const { throw Error(what_ + ": record is truncated or corrupt"); }

  std::string_view bytes_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace warp
