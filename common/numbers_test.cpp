// The one number rule (numbers.h), value by value; the binaries' command
// lines are tested against it in tests/number_cli_test.cpp.
#include "common/numbers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace kv {
namespace {

// "'<text>' <rest>", appended rather than "'" + ...: GCC 12 -Wrestrict.
std::string Quoted(const char* text, const char* rest) {
  std::string m(1, '\'');
  m += text;
  m += "' ";
  m += rest;
  return m;
}

TEST(ParseUnsignedTest, DigitsAreDecimalEvenWithLeadingZeros) {
  const std::pair<const char*, uint64_t> cases[] = {{"0", 0},    {"5", 5},    {"03000", 3000},
                                                    {"010", 10}, {"0000", 0}, {"65535", 65535}};
  for (const auto& [text, want] : cases) {
    uint64_t v = 99;
    ASSERT_TRUE(ParseUnsigned(text, 0, 65535, &v).ok()) << text;
    EXPECT_EQ(v, want) << text;
  }
  uint64_t v = 0;
  ASSERT_TRUE(ParseUnsigned("18446744073709551615", 0, UINT64_MAX, &v).ok());
  EXPECT_EQ(v, UINT64_MAX);
}

TEST(ParseUnsignedTest, RefusesEverythingElseNamingValueAndRange) {
  for (const char* text : {"+5", "-5", "-0", "0x10", "1e3", "1.5", "5.", "nan", "inf", " 5", "5 ",
                           "5\n", "1_000", "1,000", "\xd9\xa1", "five"}) {
    uint64_t v = 7;
    const Status s = ParseUnsigned(text, 0, 1000, &v);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message(), Quoted(text, "is not a decimal integer (digits only); allowed 0..1000"))
        << text;
    EXPECT_EQ(v, 7u) << text;
  }
  uint64_t v = 0;
  EXPECT_EQ(ParseUnsigned("", 1, 9, &v).message(), "'' is empty; allowed 1..9");
  EXPECT_EQ(ParseUnsigned("0", 1, 9, &v).message(), "'0' is out of range; allowed 1..9");
  EXPECT_EQ(ParseUnsigned("10", 1, 9, &v).message(), "'10' is out of range; allowed 1..9");
  EXPECT_FALSE(ParseUnsigned("18446744073709551616", 0, UINT64_MAX, &v).ok());
  EXPECT_FALSE(ParseUnsigned("99999999999999999999999", 0, UINT64_MAX, &v).ok());
}

TEST(ParseDecimalDoubleTest, AcceptsDecimalSpellings) {
  const std::pair<const char*, double> cases[] = {
      {"0", 0},         {"0.5", 0.5},       {".5", 0.5},    {"5.", 5},
      {"007.25", 7.25}, {"1e-3", 0.001},    {"1E+06", 1e6}, {"2.5e2", 250},
      {"1e3", 1000},    {"86400", 86400.0}, {"0e0", 0}};
  for (const auto& [text, want] : cases) {
    double v = -1;
    ASSERT_TRUE(ParseDecimalDouble(text, 0, 1e6, &v).ok()) << text;
    EXPECT_DOUBLE_EQ(v, want) << text;
  }
}

TEST(ParseDecimalDoubleTest, RefusesSignsHexNanInfSpacesAndOutOfRange) {
  for (const char* text :
       {"+5", "-5", "-0", "0x10", "0x1p3", "nan", "NaN",   "inf",   "-inf", "infinity",
        " 5", "5 ", ".",  "e3",   "1e",    "1e+", "1.2.3", "1e3e3", "1,5",  "5s"}) {
    double v = 7;
    const Status s = ParseDecimalDouble(text, 0, 10, &v);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message(),
              Quoted(text, "is not a decimal number (digits, a point, an exponent); allowed 0..10"))
        << text;
    EXPECT_EQ(v, 7) << text;
  }
  double v = 0;
  EXPECT_EQ(ParseDecimalDouble("", 0.001, 86400, &v).message(),
            "'' is empty; allowed 0.001..86400");
  EXPECT_EQ(ParseDecimalDouble("0.0009", 0.001, 86400, &v).message(),
            "'0.0009' is out of range; allowed 0.001..86400");
  EXPECT_EQ(ParseDecimalDouble("1e999", 0, 1e9, &v).message(),
            "'1e999' is out of range; allowed 0..1000000000");
}

TEST(NumberErrorTest, PutsTheNameInFront) {
  uint64_t v = 0;
  const Status s = NumberError("--delay-us", ParseUnsigned("1.5", 0, 1'000'000, &v));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--delay-us: '1.5' is not a decimal integer (digits only); allowed 0..1000000");
}

}  // namespace
}  // namespace kv
