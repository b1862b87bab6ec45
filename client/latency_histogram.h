// LatencyHistogram: a log-linear (HdrHistogram-style) histogram of durations
// in nanoseconds, one per recording thread, merged after the threads join:
// the client's request latencies, and the microbenchmarks' lock waits
// (bench/store_bench.cpp).
//
// Layout: values below 2^kSubBits (256 ns) each get their own bucket (exact).
// Above that, every power-of-two range [2^e, 2^(e+1)) is split into 2^(kSubBits-1)
// (128) equal buckets, so a bucket's width is at most 1/128 of its lower bound.
// A percentile is reported as the midpoint of its bucket, clamped to the exact
// min/max seen.
//
// Precision: every reported percentile v' of a true nearest-rank percentile v
// satisfies |v' - v| <= v / 256 (relative error <= 2^-kSubBits = 0.39%).
// mean, min, max and count are exact. Values above kMaxValue (~18 minutes)
// are clamped to kMaxValue.
//
// Percentile definition: nearest rank. Percentile(q) is the value of rank
// ceil(q * count) (1-based, at least 1) of the sorted samples, the same
// definition the tests use against an exact sort.
//
// Thread safety: none. Record() is for the owning thread only (no locks, no
// atomics, no allocation: the hot path is a few shifts and one increment);
// Merge() after the recording threads have joined.
#ifndef KV_CLIENT_LATENCY_HISTOGRAM_H_
#define KV_CLIENT_LATENCY_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kv {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 8;
  static constexpr int kMaxBits = 40;  // values up to 2^40 ns
  static constexpr uint64_t kMaxValue = (uint64_t{1} << kMaxBits) - 1;
  static constexpr double kRelativeErrorBound = 1.0 / (1 << kSubBits);

  LatencyHistogram();

  void Record(uint64_t value_ns) {
    if (value_ns > kMaxValue) value_ns = kMaxValue;
    ++counts_[BucketOf(value_ns)];
    ++count_;
    sum_ += value_ns;
    if (value_ns < min_) min_ = value_ns;
    if (value_ns > max_) max_ = value_ns;
  }

  // Adds all of `other`'s samples to this one.
  void Merge(const LatencyHistogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const {
    return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0;
  }
  uint64_t sum() const { return sum_; }
  // Samples in bucket i (i < NumBuckets()).
  uint64_t bucket_count(std::size_t i) const { return counts_[i]; }
  // REQUIRES: 0 <= q <= 1. Returns 0 when empty.
  uint64_t Percentile(double q) const;

  // Bucket index of a value, and the [lo, hi] range of values a bucket holds.
  static std::size_t BucketOf(uint64_t v) {
    constexpr uint64_t kHalf = uint64_t{1} << (kSubBits - 1);
    if (v < (uint64_t{1} << kSubBits)) return static_cast<std::size_t>(v);
    const int msb = 63 - __builtin_clzll(v);
    const int shift = msb - (kSubBits - 1);  // >= 1
    return static_cast<std::size_t>((static_cast<uint64_t>(shift) + 1) * kHalf +
                                    ((v >> shift) - kHalf));
  }
  static void BucketRange(std::size_t bucket, uint64_t* lo, uint64_t* hi);
  static std::size_t NumBuckets() { return BucketOf(kMaxValue) + 1; }

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace kv

#endif  // KV_CLIENT_LATENCY_HISTOGRAM_H_
