// LatencyHistogram: percentiles within the stated relative error of an exact
// nearest-rank computation over the same samples.
#include "client/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace kv {
namespace {

uint64_t ExactPercentile(const std::vector<uint64_t>& sorted, double q) {
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<uint64_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

TEST(LatencyHistogramTest, PercentilesWithinStatedBound) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> lognormal(std::log(50'000.0), 1.5);
  for (int trial = 0; trial < 3; ++trial) {
    LatencyHistogram h;
    std::vector<uint64_t> values;
    for (int i = 0; i < 100'000; ++i) {
      const auto v = static_cast<uint64_t>(lognormal(rng));
      values.push_back(v);
      h.Record(v);
    }
    std::sort(values.begin(), values.end());
    for (double q : {0.0, 0.0001, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0}) {
      const double exact = static_cast<double>(ExactPercentile(values, q));
      const double got = static_cast<double>(h.Percentile(q));
      EXPECT_LE(std::fabs(got - exact), exact * LatencyHistogram::kRelativeErrorBound + 1)
          << "q=" << q << " exact=" << exact << " got=" << got;
    }
    EXPECT_EQ(h.count(), values.size());
    EXPECT_EQ(h.min(), values.front());
    EXPECT_EQ(h.max(), values.back());
    double sum = 0;
    for (uint64_t v : values) sum += static_cast<double>(v);
    EXPECT_NEAR(h.mean(), sum / static_cast<double>(values.size()), 1e-6 * h.mean());
  }
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 0; v < 256; ++v) h.Record(v);
  EXPECT_EQ(h.Percentile(0.5), 127u);
  EXPECT_EQ(h.Percentile(1.0), 255u);
  EXPECT_EQ(h.Percentile(0.0), 0u);
}

TEST(LatencyHistogramTest, BucketsTileTheRange) {
  uint64_t expect_lo = 0;
  for (std::size_t b = 0; b < LatencyHistogram::NumBuckets(); ++b) {
    uint64_t lo, hi;
    LatencyHistogram::BucketRange(b, &lo, &hi);
    ASSERT_EQ(lo, expect_lo) << b;
    ASSERT_EQ(LatencyHistogram::BucketOf(lo), b);
    ASSERT_EQ(LatencyHistogram::BucketOf(hi), b);
    // Width bound behind the stated error: (hi - lo + 1) <= lo / 128 + 1.
    ASSERT_LE(static_cast<double>(hi - lo) / 2,
              static_cast<double>(lo) * LatencyHistogram::kRelativeErrorBound + 0.5);
    expect_lo = hi + 1;
  }
  EXPECT_EQ(expect_lo, LatencyHistogram::kMaxValue + 1);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  std::mt19937_64 rng(2);
  for (int i = 0; i < 10'000; ++i) {
    const uint64_t v = rng() % 10'000'000;
    (i % 2 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double q : {0.5, 0.99, 0.999}) EXPECT_EQ(a.Percentile(q), all.Percentile(q));
}

TEST(LatencyHistogramTest, EmptyAndHuge) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  h.Record(UINT64_MAX);  // clamped
  EXPECT_EQ(h.max(), LatencyHistogram::kMaxValue);
  EXPECT_EQ(h.Percentile(1.0), LatencyHistogram::kMaxValue);
}

}  // namespace
}  // namespace kv
