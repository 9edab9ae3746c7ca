#include "hourglass/exposition.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

std::string text_of(metric_value v) {
  std::string out;
  v.append_to(out);
  return out;
}

TEST(Exposition, AFamilyIsItsHelpThenItsTypeLine) {
  std::string out;
  exposition_writer(out).family("x_total", metric_type::counter, "Things counted.");
  EXPECT_EQ(out, "# HELP x_total Things counted.\n# TYPE x_total counter\n");
  EXPECT_EQ(to_string(metric_type::counter), "counter");
  EXPECT_EQ(to_string(metric_type::gauge), "gauge");
  EXPECT_EQ(to_string(metric_type::histogram), "histogram");
  EXPECT_EQ(to_string(metric_type::summary), "summary");
  EXPECT_EQ(to_string(metric_type::untyped), "untyped");
}

TEST(Exposition, HelpEscapesBackslashAndLineFeedOnly) {
  std::string out;
  exposition_writer(out).family("x", metric_type::gauge, "a \\ b\nc \"d\"");
  EXPECT_EQ(out, "# HELP x a \\\\ b\\nc \"d\"\n# TYPE x gauge\n");
}

TEST(Exposition, SamplesWithAndWithoutLabels) {
  std::string out;
  exposition_writer w(out);
  w.sample("plain", 3u).sample("one", {{"a", "x"}}, 4).sample("two", {{"b", "y"}, {"a", "z"}}, 5);
  w.sample("none", {}, 6);
  EXPECT_EQ(out, "plain 3\none{a=\"x\"} 4\ntwo{b=\"y\",a=\"z\"} 5\nnone 6\n") << "labels in the order given";
}

TEST(Exposition, LabelValuesAreEscaped) {
  std::string out;
  exposition_writer(out).sample("x", {{"h", "we\"ird\\na\nme"}}, 1);
  EXPECT_EQ(out, "x{h=\"we\\\"ird\\\\na\\nme\"} 1\n");
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value(""), "");
  EXPECT_EQ(escape_label_value("\n\n"), "\\n\\n");
  std::string appended = "k=";
  append_escaped_label_value(appended, "\"");
  EXPECT_EQ(appended, "k=\\\"");
}

TEST(Exposition, IntegersAreExactSignedOrUnsigned) {
  EXPECT_EQ(text_of(0), "0");
  EXPECT_EQ(text_of(42u), "42");
  EXPECT_EQ(text_of(-3), "-3");
  EXPECT_EQ(text_of(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(text_of(std::numeric_limits<std::int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(text_of(std::numeric_limits<std::int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(text_of(std::size_t{1024}), "1024");
  EXPECT_EQ(text_of(static_cast<short>(-7)), "-7");
}

TEST(Exposition, DoublesReadBackExactlyAndSpellTheSpecialValues) {
  EXPECT_EQ(text_of(0.25), "0.25");
  EXPECT_EQ(text_of(-1.5), "-1.5");
  EXPECT_EQ(text_of(2.0), "2");
  EXPECT_EQ(text_of(0.1f), "0.10000000149011612") << "a float is widened, not re-rounded";
  EXPECT_EQ(std::stod(text_of(1e-7)), 1e-7);
  EXPECT_EQ(std::stod(text_of(0.1 + 0.2)), 0.1 + 0.2);
  EXPECT_EQ(text_of(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(text_of(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(text_of(std::nan("")), "NaN");
}

TEST(Exposition, SecondsAreExactDecimalsOfWholeNanoseconds) {
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(0)), "0");
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(1'500'000'000)), "1.5");
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(42)), "0.000000042");
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(3'000'000'000)), "3");
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(1'000'000'001)), "1.000000001");
  EXPECT_EQ(text_of(metric_value::seconds_from_ns(std::numeric_limits<std::uint64_t>::max())), "18446744073.709551615");
  EXPECT_EQ(text_of(metric_value::seconds(250ms)), "0.25");
  EXPECT_EQ(text_of(metric_value::seconds(-2ms)), "-0.002");
  EXPECT_EQ(text_of(metric_value::seconds(std::chrono::microseconds(-1'234'567))), "-1.234567");
  EXPECT_EQ(text_of(metric_value::seconds(duration::min())), "-9223372036.854775808");
  EXPECT_EQ(text_of(metric_value::seconds(duration::zero())), "0");
}

TEST(Exposition, GaugeAndCounterAreOneSampleFamilies) {
  std::string out;
  exposition_writer w(out);
  w.gauge("g", "A gauge.", -2).counter("c_total", "A counter.", 7u);
  EXPECT_EQ(out,
            "# HELP g A gauge.\n# TYPE g gauge\ng -2\n"
            "# HELP c_total A counter.\n# TYPE c_total counter\nc_total 7\n");
}

TEST(Exposition, AppendsToWhatIsThereAndExposesItsString) {
  std::string out = "# existing\n";
  exposition_writer w(out);
  w.sample("x", metric_value::seconds(1s));
  EXPECT_EQ(out, "# existing\nx 1\n");
  EXPECT_EQ(&w.text(), &out);
}

// Rendering allocates only when the output grows: with room reserved, a
// page of labelled samples leaves the string's buffer where it was.
TEST(Exposition, WritesIntoReservedRoomWithoutMovingIt) {
  std::string out;
  out.reserve(4096);
  const char* before = out.data();
  exposition_writer w(out);
  w.family("hourglass_x_total", metric_type::counter, "Help.");
  for (int i = 0; i < 20; ++i) {
    w.sample("hourglass_x_total", {{"handler", "a-fairly-long-handler-name"}, {"outcome", "deadline_exceeded"}},
             static_cast<std::uint64_t>(i) * 1'000'000'007u);
  }
  EXPECT_EQ(out.data(), before);
  EXPECT_LT(out.size(), 4096u);
}

}  // namespace
}  // namespace hourglass
