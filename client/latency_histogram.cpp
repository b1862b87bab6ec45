#include "client/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace kv {

LatencyHistogram::LatencyHistogram() : counts_(NumBuckets(), 0) {}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void LatencyHistogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
}

void LatencyHistogram::BucketRange(std::size_t bucket, uint64_t* lo, uint64_t* hi) {
  constexpr uint64_t kHalf = uint64_t{1} << (kSubBits - 1);
  if (bucket < (uint64_t{1} << kSubBits)) {
    *lo = *hi = bucket;
    return;
  }
  const uint64_t shift = bucket / kHalf - 1;
  const uint64_t sub = bucket % kHalf + kHalf;
  *lo = sub << shift;
  *hi = ((sub + 1) << shift) - 1;
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank < 1) rank = 1;
  if (rank > count_) rank = count_;
  uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      uint64_t lo, hi;
      BucketRange(i, &lo, &hi);
      const uint64_t mid = lo + (hi - lo) / 2;
      return std::clamp(mid, min(), max_);
    }
  }
  return max_;
}

}  // namespace kv
