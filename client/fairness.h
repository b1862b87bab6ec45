// How evenly threads shared the work, over the operations each completed in
// one run (x_i): the client's per-thread fairness (report.cpp) and the
// microbenchmarks' (bench/store_bench.cpp).
//   Jain's index  (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one
//                 thread did everything;
//   RSD           standard deviation / mean (population), 0 when all equal;
//   max/min       the busiest thread over the idlest, a thread with none
//                 counted as 1 operation (so the ratio stays finite in JSON).
// Thread safety: a pure function.
#ifndef KV_CLIENT_FAIRNESS_H_
#define KV_CLIENT_FAIRNESS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kv {

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

}  // namespace kv

#endif  // KV_CLIENT_FAIRNESS_H_
