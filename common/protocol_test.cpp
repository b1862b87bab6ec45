// Table-driven tests of the request parser: every malformed input the servers
// must reject, with the exact error text a person will read.
#include "common/protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace kv {
namespace {

// A full 100-byte frame holding `text`, a NUL, and garbage after it (as the
// kit client sends: bytes after the NUL are whatever was in its buffer).
std::string KitFrame(const std::string& text) {
  std::string f = text;
  f.push_back('\0');
  while (f.size() < kFrameSize) f.push_back('#');
  return f.substr(0, kFrameSize);
}

struct BadCase {
  const char* name;
  std::string frame;
  std::string error;
};

class ParseRejects : public testing::TestWithParam<BadCase> {};

TEST_P(ParseRejects, WithExactMessage) {
  Request r;
  const Status s = ParseRequest(GetParam().frame, 1000, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ParseRejects,
    testing::Values(
        BadCase{"EmptyFrame", KitFrame(""), "empty request (expected pos-is_read-text)"},
        BadCase{"ZeroBytes", "", "empty request (expected pos-is_read-text)"},
        BadCase{"NoDashes", KitFrame("hello"),
                "missing '-' after pos in 'hello' (expected pos-is_read-text)"},
        BadCase{"OneDash", KitFrame("12-1"),
                "missing '-' after is_read in '12-1' (expected "
                "pos-is_read-text)"},
        BadCase{"NonNumericPos", KitFrame("abc-1-x"),
                "pos 'abc' is not a non-negative decimal integer"},
        BadCase{"PlusSign", KitFrame("+5-1-x"), "pos '+5' is not a non-negative decimal integer"},
        BadCase{"SpaceInPos", KitFrame(" 5-1-x"), "pos ' 5' is not a non-negative decimal integer"},
        BadCase{"NegativePos", KitFrame("-5-1-x"), "pos -5 is negative; allowed [0,1000)"},
        BadCase{"EmptyPos", KitFrame("-x-1"), "pos is empty (expected pos-is_read-text)"},
        BadCase{"OverflowPos", KitFrame("99999999999999999999999-1-x"),
                "pos 99999999999999999999999 out of range [0,1000)"},
        BadCase{"HugePosIsCut", KitFrame(std::string(60, '9') + "-1-x"),
                "pos 999999999999999999999999... out of range [0,1000)"},
        BadCase{"PosEqualsN", KitFrame("1000-1-x"), "pos 1000 out of range [0,1000)"},
        BadCase{"PosAboveN", KitFrame("1200-0-x"), "pos 1200 out of range [0,1000)"},
        BadCase{"IsReadTwo", KitFrame("5-2-x"), "is_read '2' must be 0 (write) or 1 (read)"},
        BadCase{"IsReadEmpty", KitFrame("5--x"), "is_read '' must be 0 (write) or 1 (read)"},
        BadCase{"IsReadWord", KitFrame("5-yes-x"), "is_read 'yes' must be 0 (write) or 1 (read)"},
        BadCase{"BinaryInPos", KitFrame("\x01\x02-1-x"),
                "pos '\\x01\\x02' is not a non-negative decimal integer"},
        BadCase{"ControlByteInText", KitFrame("5-0-ab\x07z"),
                "text byte 0x07 at offset 2 is not printable UTF-8"},
        BadCase{"InvalidUtf8InText", KitFrame("5-0-ok\xff"),
                "text byte 0xff at offset 2 is not printable UTF-8"},
        BadCase{"TruncatedUtf8", KitFrame("5-0-\xc3"),
                "text byte 0xc3 at offset 0 is not printable UTF-8"},
        BadCase{"OverlongUtf8", KitFrame("5-0-\xc0\xaf"),
                "text byte 0xc0 at offset 0 is not printable UTF-8"},
        BadCase{"NoNulInFullFrame", std::string(kFrameSize, '7'),
                "frame has no NUL terminator in its 100 bytes"}),
    [](const testing::TestParamInfo<BadCase>& param) { return std::string(param.param.name); });

TEST(ParseRequest, KitReadWithGarbageAfterNul) {
  Request r;
  ASSERT_TRUE(
      ParseRequest(KitFrame("42-1-String[42] has been modified by thread 7"), 100, &r).ok());
  EXPECT_EQ(r.pos, 42u);
  EXPECT_TRUE(r.is_read);
}

TEST(ParseRequest, WriteKeepsDashesInText) {
  const std::string frame = KitFrame("7-0-a-b--c-");  // r.text views it
  Request r;
  ASSERT_TRUE(ParseRequest(frame, 10, &r).ok());
  EXPECT_EQ(r.pos, 7u);
  EXPECT_FALSE(r.is_read);
  EXPECT_EQ(r.text, "a-b--c-");
}

TEST(ParseRequest, ShortFrameFromHalfClose) {
  Request r;
  ASSERT_TRUE(ParseRequest("3-1-", 10, &r).ok());
  EXPECT_EQ(r.pos, 3u);
  EXPECT_TRUE(r.is_read);
  EXPECT_EQ(r.text, "");
}

TEST(ParseRequest, TrailingNewlineFromEchoIsIgnored) {
  Request r;
  ASSERT_TRUE(ParseRequest("3-0-hello\r\n", 10, &r).ok());
  EXPECT_EQ(r.text, "hello");
}

TEST(ParseRequest, Utf8TextAccepted) {
  const std::string frame = KitFrame("0-0-caf\xc3\xa9 \xe2\x82\xac");
  Request r;
  ASSERT_TRUE(ParseRequest(frame, 1, &r).ok());
  EXPECT_EQ(r.text, "caf\xc3\xa9 \xe2\x82\xac");
}

TEST(ParseRequest, LeadingZerosAndLastPosition) {
  Request r;
  ASSERT_TRUE(ParseRequest(KitFrame("0999-1-"), 1000, &r).ok());
  EXPECT_EQ(r.pos, 999u);
}

TEST(ParseRequest, TextUpTo95BytesFitsAFrame) {
  const std::string text(95, 'x');
  const std::string frame = KitFrame("1-0-" + text);
  Request r;
  ASSERT_TRUE(ParseRequest(frame, 2, &r).ok());
  EXPECT_EQ(r.text.size(), 95u);
}

TEST(Frames, FillFramePadsAndCuts) {
  Frame f;
  FillFrame(std::string(150, 'a'), &f);
  EXPECT_EQ(FrameText(std::string_view(f.data(), f.size())).size(), kMaxTextLen);
  EXPECT_EQ(f[kMaxTextLen], '\0');
  FillFrame("hi", &f);
  EXPECT_EQ(FrameText(std::string_view(f.data(), f.size())), "hi");
  EXPECT_EQ(f[99], '\0');
}

TEST(Frames, RequestFrameRoundTrips) {
  Frame f;
  FillRequestFrame(12, false, "String[12] has been modified by thread 3", &f);
  Request r;
  ASSERT_TRUE(ParseRequest(std::string_view(f.data(), f.size()), 13, &r).ok());
  EXPECT_EQ(r.pos, 12u);
  EXPECT_FALSE(r.is_read);
  EXPECT_EQ(r.text, "String[12] has been modified by thread 3");
}

TEST(Frames, ErrorFrameIsMarkedAndBounded) {
  Frame f;
  FillErrorFrame(std::string(500, 'e'), &f);
  const std::string_view text = FrameText(std::string_view(f.data(), f.size()));
  EXPECT_TRUE(IsErrorReply(text));
  EXPECT_EQ(text.size(), kMaxTextLen);
}

TEST(Sanitize, EscapesAndBounds) {
  EXPECT_EQ(Sanitize("ab\n'"), "ab\\x0a\\x27");
  EXPECT_EQ(Sanitize(std::string(40, 'z'), 4), "zzzz...");
}

}  // namespace
}  // namespace kv
