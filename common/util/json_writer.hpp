// A JSON text written straight into a string, for answers on the serving path: a DOM
// (nlohmann::json) costs an allocation per value and a map per object, about a tenth of the
// broker's CPU per query. Strings are escaped as JSON requires; invalid UTF-8 becomes U+FFFD (as
// nlohmann's error_handler_t::replace). Numbers: integers exactly, doubles in their shortest
// round-trip form; NaN and infinities, which JSON lacks, as null.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace warp {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view name);  // inside an object, before its value
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(double number);
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(bool truth);
  // A value that is JSON text already (a stored document), written as it is: the caller vouches
  // for it.
  JsonWriter& raw(std::string_view json);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void separate();  // the comma before a value or key that is not the first of its container
  JsonWriter& open(char bracket);
  JsonWriter& close(char bracket);
  template <class Number>
  JsonWriter& integer(Number number);
  std::string out_;
  bool first_ = true;  // no value yet in the innermost container
};

// `text` as a JSON string literal, quotes included.
void append_json_string(std::string& out, std::string_view text);

}  // namespace warp
