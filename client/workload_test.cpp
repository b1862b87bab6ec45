// Workload: the kit sequence bit for bit, the distributions statistically
// (fixed seeds, tolerances several standard deviations wide), parsing.
#include "client/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/net.h"

namespace kv {
namespace {

std::string Text(const Frame& f) {
  return std::string(FrameText(std::string_view(f.data(), f.size())));
}

TEST(WorkloadTest, KitSequencePinned) {
  // Values of glibc rand_r(seed = thread) % 100 and % 100 < 70, as the kit
  // client draws them (n = 100).
  WorkloadSpec spec;
  spec.n = 100;
  const std::vector<std::pair<uint64_t, bool>> want0 = {{84, false}, {82, true}, {3, true}};
  const std::vector<std::pair<uint64_t, bool>> want1 = {{13, true}, {8, false}, {77, false}};
  Workload w0(spec, 0), w1(spec, 1);
  for (const auto& [pos, is_read] : want0) {
    const Op op = w0.Next();
    EXPECT_EQ(op.pos, pos);
    EXPECT_EQ(op.is_read, is_read);
  }
  for (const auto& [pos, is_read] : want1) {
    const Op op = w1.Next();
    EXPECT_EQ(op.pos, pos);
    EXPECT_EQ(op.is_read, is_read);
  }
}

TEST(WorkloadTest, KitSequenceMatchesRandRForAnyThread) {
  WorkloadSpec spec;
  spec.n = 1000;
  for (uint32_t t : {0u, 7u, 99u}) {
    unsigned int seed = t;
    Workload w(spec, t);
    for (int i = 0; i < 10; ++i) {
      const uint64_t pos = static_cast<uint64_t>(rand_r(&seed)) % 1000;
      const bool is_read = rand_r(&seed) % 100 < 70;
      const Op op = w.Next();
      ASSERT_EQ(op.pos, pos) << "thread " << t << " request " << i;
      ASSERT_EQ(op.is_read, is_read);
    }
  }
}

TEST(WorkloadTest, KitRequestText) {
  WorkloadSpec spec;
  spec.n = 100;
  Workload w(spec, 7);
  Frame f;
  w.FillRequest(Op{42, false}, &f);
  EXPECT_EQ(Text(f), "42-0-String[42] has been modified by thread 7");
  w.FillRequest(Op{3, true}, &f);
  EXPECT_EQ(Text(f), "3-1-String[3] has been modified by thread 7");
  // Zero padding after the NUL.
  for (std::size_t i = Text(f).size(); i < kFrameSize; ++i) EXPECT_EQ(f[i], '\0');
}

// The text is composed by hand; it must be the kit's printf formats, byte for byte, for
// any position and thread (the widest ones included).
TEST(WorkloadTest, KitRequestTextIsThePrintfFormat) {
  WorkloadSpec spec;
  spec.n = 10'000'000;
  for (const uint32_t thread : {0u, 9u, 10u, 4095u, 4294967295u}) {
    Workload w(spec, thread);
    for (const uint64_t pos : {uint64_t{0}, uint64_t{7}, uint64_t{10}, uint64_t{99'999},
                               uint64_t{9'999'999}, std::numeric_limits<uint64_t>::max()}) {
      for (const bool is_read : {false, true}) {
        char want[200];
        std::snprintf(want, sizeof want, "%llu-%d-String[%llu] has been modified by thread %u",
                      static_cast<unsigned long long>(pos), is_read ? 1 : 0,
                      static_cast<unsigned long long>(pos), thread);
        Frame f;
        w.FillRequest(Op{pos, is_read}, &f);
        EXPECT_EQ(Text(f), std::string(want).substr(0, kMaxTextLen));
      }
    }
  }
}

TEST(WorkloadTest, SameSeedSameStreamOtherSeedOtherStream) {
  for (const char* dist : {"uniform", "zipf:0.99", "hotspot:0.1:0.9"}) {
    WorkloadSpec spec;
    spec.n = 1'000'000;
    ASSERT_TRUE(Distribution::Parse(dist, &spec.dist).ok());
    spec.seed = 42;
    Workload a(spec, 3), b(spec, 3);
    spec.seed = 43;
    Workload c(spec, 3);
    int same_as_other_seed = 0;
    for (int i = 0; i < 100; ++i) {
      const Op x = a.Next(), y = b.Next(), z = c.Next();
      ASSERT_EQ(x.pos, y.pos) << dist;
      ASSERT_EQ(x.is_read, y.is_read) << dist;
      same_as_other_seed += x.pos == z.pos;
    }
    EXPECT_LT(same_as_other_seed, 50) << dist;
  }
}

double ReadFraction(WorkloadSpec spec, int draws) {
  Workload w(spec, 1);
  int reads = 0;
  for (int i = 0; i < draws; ++i) reads += w.Next().is_read;
  return static_cast<double>(reads) / draws;
}

TEST(WorkloadTest, ReadRatio) {
  WorkloadSpec spec;
  spec.n = 1000;
  spec.seed = 5;
  for (double r : {0.0, 0.25, 0.7, 0.333, 1.0}) {  // whole and fractional percents
    spec.read_ratio = r;
    EXPECT_NEAR(ReadFraction(spec, 100'000), r, 0.01) << r;
  }
  ASSERT_TRUE(Distribution::Parse("zipf:1.2", &spec.dist).ok());
  spec.read_ratio = 0.9;
  EXPECT_NEAR(ReadFraction(spec, 100'000), 0.9, 0.01);
}

TEST(WorkloadTest, UniformIsFlat) {
  WorkloadSpec spec;
  spec.n = 10;
  spec.seed = 9;
  Workload w(spec, 0);
  std::vector<int> count(10);
  for (int i = 0; i < 100'000; ++i) ++count[w.Next().pos];
  for (int c : count) EXPECT_NEAR(c, 10'000, 400);  // ~4 sigma
}

TEST(WorkloadTest, ZipfMatchesTheoreticalFrequencies) {
  for (double s : {0.5, 0.99, 1.0, 1.5}) {
    WorkloadSpec spec;
    spec.n = 100;
    spec.seed = 11;
    ASSERT_TRUE(Distribution::Parse("zipf:" + std::to_string(s), &spec.dist).ok());
    double h = 0;
    for (int k = 1; k <= 100; ++k) h += std::pow(k, -s);
    Workload w(spec, 2);
    std::vector<int> count(100);
    constexpr int kDraws = 200'000;
    for (int i = 0; i < kDraws; ++i) {
      const Op op = w.Next();
      ASSERT_LT(op.pos, 100u);
      ++count[op.pos];
    }
    for (int k : {1, 2, 10, 50}) {
      const double p = std::pow(k, -s) / h;
      const double sigma = std::sqrt(kDraws * p * (1 - p));
      EXPECT_NEAR(count[k - 1], kDraws * p, 5 * sigma + 1) << "s=" << s << " k=" << k;
    }
  }
}

TEST(WorkloadTest, ZipfLargeNStaysInRange) {
  WorkloadSpec spec;
  spec.n = 10'000'000;
  ASSERT_TRUE(Distribution::Parse("zipf:0.99", &spec.dist).ok());
  Workload w(spec, 0);
  uint64_t max = 0;
  for (int i = 0; i < 100'000; ++i) max = std::max(max, w.Next().pos);
  EXPECT_LT(max, spec.n);
  EXPECT_GT(max, spec.n / 100);  // the tail is reached
  spec.n = 1;
  Workload one(spec, 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Next().pos, 0u);
}

TEST(WorkloadTest, Hotspot) {
  WorkloadSpec spec;
  spec.n = 1000;
  spec.seed = 3;
  ASSERT_TRUE(Distribution::Parse("hotspot:0.2:0.8", &spec.dist).ok());
  Workload w(spec, 0);
  int hot = 0;
  constexpr int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const Op op = w.Next();
    ASSERT_LT(op.pos, 1000u);
    hot += op.pos < 200;
  }
  EXPECT_NEAR(static_cast<double>(hot) / kDraws, 0.8, 0.01);
  // All keys hot: still in range and uniform-ish.
  ASSERT_TRUE(Distribution::Parse("hotspot:1:0.5", &spec.dist).ok());
  Workload all(spec, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(all.Next().pos, 1000u);
}

TEST(WorkloadTest, TextLengths) {
  WorkloadSpec spec;
  spec.n = 1000;
  ASSERT_TRUE(TextLength::Parse("fixed:50", &spec.text).ok());
  Workload w(spec, 0);
  Frame f;
  w.FillRequest(Op{123, false}, &f);
  std::string t = Text(f);
  EXPECT_EQ(t.size(), std::string("123-0-").size() + 50) << t;
  EXPECT_EQ(t.rfind("123-0-String[123]", 0), 0u) << t;
  // Capped so the whole text fits in 99 bytes.
  ASSERT_TRUE(TextLength::Parse("fixed:99", &spec.text).ok());
  Workload capped(spec, 0);
  capped.FillRequest(Op{999, false}, &f);
  EXPECT_EQ(Text(f).size(), kMaxTextLen);
  // Gamma: mean k*theta when the cap rarely bites.
  ASSERT_TRUE(TextLength::Parse("gamma:2:15", &spec.text).ok());
  Workload g(spec, 0);
  double sum = 0;
  constexpr int kDraws = 20'000;
  for (int i = 0; i < kDraws; ++i) {
    g.FillRequest(Op{5, false}, &f);
    const std::size_t len = Text(f).size() - 4;  // "5-0-"
    ASSERT_GE(len, 1u);
    ASSERT_LE(len, kMaxTextLen - 4);
    sum += static_cast<double>(len);
  }
  EXPECT_NEAR(sum / kDraws, 30.0, 1.0);
}

TEST(WorkloadTest, ParseRejectsBadSpecs) {
  Distribution d;
  TextLength t;
  for (const char* bad : {"", "zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:x", "zipf:1x",
                          "hotspot:0:0.5", "hotspot:0.5", "hotspot:0.5:2", "normal"}) {
    EXPECT_FALSE(Distribution::Parse(bad, &d).ok()) << bad;
  }
  for (const char* bad : {"", "fixed:0", "fixed:100", "fixed:-1", "fixed:a", "gamma:1", "gamma:0:1",
                          "gamma:1:0", "huge"}) {
    EXPECT_FALSE(TextLength::Parse(bad, &t).ok()) << bad;
  }
  ASSERT_TRUE(Distribution::Parse("zipf:0.99", &d).ok());
  EXPECT_EQ(d.ToString(), "zipf:0.99");
  ASSERT_TRUE(Distribution::Parse("hotspot:0.1:0.9", &d).ok());
  EXPECT_EQ(d.ToString(), "hotspot:0.1:0.9");
}

// Each of `bad` refused; each `good` text parsed and printed back as its
// canonical text.
template <typename Spec>
void ExpectSpellings(std::initializer_list<const char*> bad,
                     std::initializer_list<std::pair<const char*, const char*>> good) {
  Spec spec;
  for (const char* text : bad) EXPECT_FALSE(Spec::Parse(text, &spec).ok()) << text;
  for (const auto& [text, canonical] : good) {
    ASSERT_TRUE(Spec::Parse(text, &spec).ok()) << text;
    EXPECT_EQ(spec.ToString(), canonical);
  }
}

// The numbers inside a spec follow the one number rule (common/numbers.h).
TEST(WorkloadTest, SpecNumbersFollowTheNumberRule) {
  ExpectSpellings<Distribution>(
      {"zipf:+1", "zipf: 1", "zipf:1 ", "zipf:0x1", "zipf:nan", "zipf:inf", "zipf:1e999",
       "hotspot:+0.5:0.5", "hotspot:0.5:-0", "hotspot:0.5:0.5:1", "uniform:1"},
      {{"uniform", "uniform"},
       {"zipf:1e-1", "zipf:0.1"},
       {"zipf:.5", "zipf:0.5"},
       {"hotspot:1:0", "hotspot:1:0"}});
  ExpectSpellings<TextLength>({"fixed:+5", "fixed:5.0", "fixed:5e0", "fixed:0x10", "fixed: 5",
                               "fixed:", "gamma:+2:3", "gamma:2:nan", "kit:1"},
                              {{"kit", "kit"},
                               {"fixed:010", "fixed:10"},
                               {"fixed:99", "fixed:99"},
                               {"gamma:2:15", "gamma:2:15"}});
  TextLength t;
  ASSERT_TRUE(TextLength::Parse("fixed:010", &t).ok());
  EXPECT_EQ(t.kind, TextLength::Kind::kFixed);
  EXPECT_EQ(t.fixed, 10u);
}

TEST(WorkloadTest, KitPortTwin) {
  EXPECT_EQ(KitPortTwin(3000), 47115);
  EXPECT_EQ(KitPortTwin(KitPortTwin(12345)), 12345);
}

}  // namespace
}  // namespace kv
