// Per-thread fairness and acquire-latency tails for the microbenchmarks.
//
// Fairness over the operations each thread completed in one run (x_i):
//   Jain's index  (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one
//                 thread did everything;
//   RSD           standard deviation / mean (population), 0 when all equal;
//   max/min       the busiest thread over the idlest, a thread with none
//                 counted as 1 operation (so the ratio stays finite in JSON).
// Tails: a fixed log-linear histogram of sampled lock waits in nanoseconds
// (8 sub-buckets per power of two, so a quantile is within 12.5% of the
// truth), one per thread, merged after the run; no allocation while it runs.
#ifndef KV_BENCH_BENCH_STATS_H_
#define KV_BENCH_BENCH_STATS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kv::bench {

struct Fairness {
  double jain = 0;
  double rsd = 0;
  double max_min = 0;
};

inline Fairness FairnessOf(const std::vector<uint64_t>& x) {
  Fairness f;
  if (x.empty()) return f;
  double sum = 0, sum_sq = 0;
  for (const uint64_t v : x) {
    sum += static_cast<double>(v);
    sum_sq += static_cast<double>(v) * static_cast<double>(v);
  }
  const auto n = static_cast<double>(x.size());
  f.jain = sum_sq > 0 ? sum * sum / (n * sum_sq) : 1.0;
  const double mean = sum / n;
  const double var = std::max(0.0, sum_sq / n - mean * mean);
  f.rsd = mean > 0 ? std::sqrt(var) / mean : 0.0;
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  f.max_min = static_cast<double>(*hi) / static_cast<double>(std::max<uint64_t>(*lo, 1));
  return f;
}

class WaitHistogram {
 public:
  static constexpr int kSubBits = 3;
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;

  void Add(int64_t ns) {
    ++counts_[Bucket(static_cast<uint64_t>(std::max<int64_t>(ns, 0)))];
    ++total_;
  }
  void Merge(const WaitHistogram& o) {
    for (int b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
    total_ += o.total_;
  }
  uint64_t total() const { return total_; }

  // The q-quantile (0 < q <= 1) as its bucket's midpoint; 0 when empty.
  double Quantile(double q) const {
    if (total_ == 0) return 0;
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= std::max<uint64_t>(rank, 1)) return (Lower(b) + Lower(b + 1)) / 2.0;
    }
    return Lower(kBuckets - 1);
  }

  // Values below 2^kSubBits get a bucket each; above, the top kSubBits bits
  // after the leading one pick one of 8 buckets within the power of two.
  static int Bucket(uint64_t v) {
    if (v < (1u << kSubBits)) return static_cast<int>(v);
    const int top = 63 - std::countl_zero(v);
    const int shift = top - kSubBits;
    return ((shift + 1) << kSubBits) + static_cast<int>((v >> shift) & ((1u << kSubBits) - 1));
  }
  static double Lower(int b) {
    if (b < (1 << kSubBits)) return b;
    const int shift = (b >> kSubBits) - 1;
    const uint64_t mant =
        (uint64_t{1} << kSubBits) | static_cast<uint64_t>(b & ((1 << kSubBits) - 1));
    return std::ldexp(static_cast<double>(mant), shift);
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

}  // namespace kv::bench

#endif  // KV_BENCH_BENCH_STATS_H_
