#include "hourglass/support/json.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <cmath>
#include <limits>

namespace hourglass::support {
namespace {

TEST(JsonWriter, NestedLayout) {
  json_writer j;
  j.begin_object().member("a", 1).key("b").begin_array().value(1).value("x").begin_object().end_object().end_array();
  j.key("c").begin_object().member("d", true).key("e").null().end_object();
  j.key("f").begin_array().end_array().member("g", std::uint64_t{7});
  EXPECT_EQ(j.end_object().take(), R"({"a": 1, "b": [1, "x", {}], "c": {"d": true, "e": null}, "f": [], "g": 7})");
}

TEST(JsonWriter, Numbers) {
  json_writer j;
  j.begin_array().value(1.5).fixed(2.0, 1).general(1.5).general(0.1234567).general(12345678.0, 4);
  j.general(std::numeric_limits<double>::quiet_NaN()).value(std::numeric_limits<double>::infinity()).value(-3);
  EXPECT_EQ(j.end_array().take(), "[1.500, 2.0, 1.5, 0.123457, 1.235e+07, null, null, -3]");
}

TEST(JsonWriter, StringsAreAlwaysValidJson) {
  std::string out;
  append_json_string(out, "a\"b\\c\n\t\x01\x7f \xC3\xA9 \xFF");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f \xC3\xA9 \xEF\xBF\xBD\"");
  EXPECT_EQ(boost::json::parse(out).as_string(), "a\"b\\c\n\t\x01\x7f \xC3\xA9 \xEF\xBF\xBD");
}

TEST(JsonObject, FlatWithNewline) {
  EXPECT_EQ(json_object().str(), "{}\n");
  EXPECT_EQ(json_object().add("error", "x").add("ms", 1.0).add("n", 2).add_raw("r", "[1]").str(),
            "{\"error\": \"x\", \"ms\": 1.000, \"n\": 2, \"r\": [1]}\n");
}

TEST(Base64, Padding) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64(std::string_view("\xFF\x00\x80", 3)), "/wCA");
}

TEST(JsonRead, Members) {
  const std::string doc = R"({"error": "rejected", "ms": 1.5, "n": 3, "inner": {"x": "y"}})";
  EXPECT_EQ(string_member(doc, "error"), "rejected");
  EXPECT_EQ(number_member(doc, "ms"), 1.5);
  EXPECT_EQ(number_member(doc, "n"), 3.0);
  EXPECT_FALSE(string_member(doc, "ms"));
  EXPECT_FALSE(string_member(doc, "x")) << "only the top level";
  EXPECT_FALSE(string_member("not json", "error"));
  EXPECT_FALSE(number_member("[1]", "n"));
}

TEST(JsonRead, IntMember) {
  const auto v = parse_json(R"({"a": 5, "b": 5.0, "c": 5.5, "d": "5", "e": 99})");
  ASSERT_TRUE(v);
  const auto& o = v->as_object();
  EXPECT_EQ(int_member(o, "a", 0, 10), 5);
  EXPECT_EQ(int_member(o, "b", 0, 10), 5);
  EXPECT_FALSE(int_member(o, "c", 0, 10));
  EXPECT_FALSE(int_member(o, "d", 0, 10));
  EXPECT_FALSE(int_member(o, "e", 0, 10));
  EXPECT_FALSE(int_member(o, "missing", 0, 10));
  EXPECT_FALSE(parse_json("{"));
}

}  // namespace
}  // namespace hourglass::support
