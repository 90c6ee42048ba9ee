// JsonWriter against a JSON parser: whatever goes in comes back as the same values.
#include "common/util/json_writer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "common/util/utf8.hpp"
#include "tests/support/test_seed.hpp"

namespace warp {
namespace {

TEST(JsonWriter, NestedValuesParseBack) {
  JsonWriter json;
  json.begin_object().key("a").value(int64_t{-3}).key("b").begin_array();
  json.value(uint64_t{18446744073709551615ull}).value(true).value(false).value(0.1).value(1e300);
  json.begin_object().end_object().begin_array().end_array();
  json.end_array().key("c").value("x").key("empty").begin_object().end_object().end_object();
  const auto parsed = nlohmann::json::parse(json.text());
  EXPECT_EQ(parsed["a"].get<int64_t>(), -3);
  ASSERT_EQ(parsed["b"].size(), 7u);
  EXPECT_EQ(parsed["b"][0].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(parsed["b"][1], true);
  EXPECT_EQ(parsed["b"][2], false);
  EXPECT_EQ(parsed["b"][3].get<double>(), 0.1);
  EXPECT_EQ(parsed["b"][4].get<double>(), 1e300);
  EXPECT_TRUE(parsed["b"][5].is_object() && parsed["b"][5].empty());
  EXPECT_TRUE(parsed["b"][6].is_array() && parsed["b"][6].empty());
  EXPECT_EQ(parsed["c"], "x");
  EXPECT_TRUE(parsed["empty"].is_object());
}

TEST(JsonWriter, NonFiniteNumbersAreNull) {
  JsonWriter json;
  json.begin_array()
      .value(std::numeric_limits<double>::quiet_NaN())
      .value(std::numeric_limits<double>::infinity())
      .end_array();
  EXPECT_EQ(json.text(), "[null,null]");
}

TEST(JsonWriter, DoublesRoundTrip) {
  std::mt19937_64 rng(testing::test_seed());
  std::uniform_real_distribution<double> real(-1e6, 1e6);
  JsonWriter json;
  std::vector<double> values;
  json.begin_array();
  for (int i = 0; i < 2000; ++i) {
    const double v = i % 2 ? real(rng) : static_cast<double>(static_cast<float>(real(rng) / 1e3));
    values.push_back(v);
    json.value(v);
  }
  json.end_array();
  const auto parsed = nlohmann::json::parse(json.text());
  ASSERT_EQ(parsed.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(parsed[i].get<double>(), values[i]) << json.text();
}

TEST(JsonWriter, StringsEscapedAndInvalidUtf8Replaced) {
  const std::string cases[] = {"plain",
                               "quote \" backslash \\ slash /",
                               "\n\r\t\b\f",
                               std::string("nul\0x", 5),
                               "\x01\x1f\x7f",
                               "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80",
                               "\xef\xbf\xbd kept"};
  for (const std::string& text : cases) {
    JsonWriter json;
    json.value(text);
    EXPECT_EQ(nlohmann::json::parse(json.text()).get<std::string>(), text) << json.text();
  }
  // Invalid UTF-8 (a lone continuation byte, a truncated sequence, an overlong form, a surrogate):
  // each bad sequence becomes U+FFFD as utf8_sanitize makes it, and the text around it stays.
  for (const std::string text : {"a\x80z", "a\xe6\x97", "\xc0\xaf", "\xed\xa0\x80!"}) {
    JsonWriter json;
    json.value(text);
    const std::string back = nlohmann::json::parse(json.text()).get<std::string>();
    EXPECT_EQ(back, utf8_sanitize(text)) << json.text();
    EXPECT_NE(back.find("\xef\xbf\xbd"), std::string::npos) << json.text();
  }
  EXPECT_EQ(utf8_sanitize("a\x80z"), "a\xef\xbf\xbdz");
  // Random bytes: always a valid JSON string, the sanitized text.
  std::mt19937_64 rng(testing::test_seed());
  for (int i = 0; i < 500; ++i) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    JsonWriter json;
    json.value(text);
    EXPECT_EQ(nlohmann::json::parse(json.text()).get<std::string>(), utf8_sanitize(text)) << i;
  }
}

}  // namespace
}  // namespace warp
