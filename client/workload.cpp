#include "client/workload.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/numbers.h"

namespace kv {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__extension__ typedef unsigned __int128 Uint128;

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// A parameter of a --dist or --text-len form, by the number rule
// (numbers.h; no sign: no parameter is negative).
bool ParseDouble(std::string_view s, double* out) {
  return ParseDecimalDouble(s, 0, std::numeric_limits<double>::max(), out).ok();
}

// "A:B", two parameters.
bool ParseDoublePair(std::string_view s, double* a, double* b) {
  const std::size_t colon = s.find(':');
  return colon != std::string_view::npos && ParseDouble(s.substr(0, colon), a) &&
         ParseDouble(s.substr(colon + 1), b);
}

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Helpers of the rejection-inversion Zipf sampler (Hoermann & Derflinger,
// "Rejection-inversion to generate variates from monotone discrete
// distributions", 1996; same formulation as Apache Commons RNG).
double Helper1(double x) {  // log1p(x)/x
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double Helper2(double x) {  // expm1(x)/x
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x
                             : 1 + x * 0.5 * (1 + x * (1.0 / 3.0) * (1 + 0.25 * x));
}
double ZipfH(double x, double s) { return std::exp(-s * std::log(x)); }
double ZipfHIntegral(double x, double s) {
  const double log_x = std::log(x);
  return Helper2((1 - s) * log_x) * log_x;
}
double ZipfHIntegralInverse(double x, double s) {
  double t = x * (1 - s);
  if (t < -1) t = -1;  // numerical safety
  return std::exp(Helper1(t) * x);
}

}  // namespace

Status Distribution::Parse(std::string_view text, Distribution* out) {
  Distribution d;
  if (text == "uniform") {
    *out = d;
    return Status::OK();
  }
  if (text.starts_with("zipf:")) {
    d.kind = Kind::kZipf;
    if (!ParseDouble(text.substr(5), &d.zipf_s) || d.zipf_s <= 0 || d.zipf_s > 10) {
      return Status::InvalidArgument("--dist zipf:S needs 0 < S <= 10, got '" + std::string(text) +
                                     "'");
    }
    *out = d;
    return Status::OK();
  }
  if (text.starts_with("hotspot:")) {
    d.kind = Kind::kHotspot;
    if (!ParseDoublePair(text.substr(8), &d.hot_keys, &d.hot_requests) ||
        !(d.hot_keys > 0 && d.hot_keys <= 1) || !(d.hot_requests >= 0 && d.hot_requests <= 1)) {
      return Status::InvalidArgument(
          "--dist hotspot:KEYFRAC:REQFRAC needs 0 < KEYFRAC <= 1 and "
          "0 <= REQFRAC <= 1, got '" +
          std::string(text) + "'");
    }
    *out = d;
    return Status::OK();
  }
  return Status::InvalidArgument(
      "--dist must be uniform, zipf:S or "
      "hotspot:KEYFRAC:REQFRAC, got '" +
      std::string(text) + "'");
}

std::string Distribution::ToString() const {
  switch (kind) {
    case Kind::kUniform:
      return "uniform";
    case Kind::kZipf:
      return "zipf:" + FormatDouble(zipf_s);
    case Kind::kHotspot:
      return "hotspot:" + FormatDouble(hot_keys) + ":" + FormatDouble(hot_requests);
  }
  return "?";
}

Status TextLength::Parse(std::string_view text, TextLength* out) {
  TextLength t;
  if (text == "kit") {
    *out = t;
    return Status::OK();
  }
  if (text.starts_with("fixed:")) {
    t.kind = Kind::kFixed;
    uint64_t length = 0;
    if (!ParseUnsigned(text.substr(6), 1, kMaxTextLen, &length).ok()) {
      return Status::InvalidArgument("--text-len fixed:L needs 1 <= L <= 99, got '" +
                                     std::string(text) + "'");
    }
    t.fixed = static_cast<uint32_t>(length);
    *out = t;
    return Status::OK();
  }
  if (text.starts_with("gamma:")) {
    t.kind = Kind::kGamma;
    if (!ParseDoublePair(text.substr(6), &t.gamma_k, &t.gamma_theta) ||
        !(t.gamma_k > 0 && t.gamma_k <= 1000) || !(t.gamma_theta > 0 && t.gamma_theta <= 1000)) {
      return Status::InvalidArgument("--text-len gamma:K:THETA needs 0 < K, THETA <= 1000, got '" +
                                     std::string(text) + "'");
    }
    *out = t;
    return Status::OK();
  }
  return Status::InvalidArgument(
      "--text-len must be kit, fixed:L or "
      "gamma:K:THETA, got '" +
      std::string(text) + "'");
}

std::string TextLength::ToString() const {
  switch (kind) {
    case Kind::kKit:
      return "kit";
    case Kind::kFixed:
      return "fixed:" + std::to_string(fixed);
    case Kind::kGamma:
      return "gamma:" + FormatDouble(gamma_k) + ":" + FormatDouble(gamma_theta);
  }
  return "?";
}

Workload::Workload(const WorkloadSpec& spec, uint32_t thread_index)
    : spec_(spec), thread_(thread_index) {
  kit_rng_ = spec_.dist.kind == Distribution::Kind::kUniform;
  uint64_t mix = spec_.seed ^ (0x9e3779b97f4a7c15ULL * (thread_index + 1ULL));
  rand_r_seed_ = spec_.seed == 0 ? thread_index : static_cast<unsigned int>(SplitMix64(&mix));
  for (uint64_t& word : s_) word = SplitMix64(&mix);
  const double pct = spec_.read_ratio * 100.0;
  read_percent_ = std::fabs(pct - std::round(pct)) < 1e-9 ? static_cast<int>(std::lround(pct)) : -1;
  if (spec_.dist.kind == Distribution::Kind::kHotspot) {
    hot_count_ =
        static_cast<uint64_t>(std::ceil(spec_.dist.hot_keys * static_cast<double>(spec_.n)));
    if (hot_count_ < 1) hot_count_ = 1;
    if (hot_count_ > spec_.n) hot_count_ = spec_.n;
  }
  if (spec_.dist.kind == Distribution::Kind::kZipf) {
    const double s = spec_.dist.zipf_s;
    zipf_h_x1_ = ZipfHIntegral(1.5, s) - 1;
    zipf_h_n_ = ZipfHIntegral(static_cast<double>(spec_.n) + 0.5, s);
    zipf_s_param_ = 2 - ZipfHIntegralInverse(ZipfHIntegral(2.5, s) - ZipfH(2, s), s);
  }
}

uint64_t Workload::NextU64() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Workload::NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

uint64_t Workload::UniformBelow(uint64_t bound) {
  // Lemire's multiply-shift; the bias is < bound / 2^64, negligible here.
  return static_cast<uint64_t>((static_cast<Uint128>(NextU64()) * bound) >> 64);
}

uint64_t Workload::ZipfRank() {
  const double s = spec_.dist.zipf_s;
  const double n = static_cast<double>(spec_.n);
  while (true) {
    const double u = zipf_h_n_ + NextDouble() * (zipf_h_x1_ - zipf_h_n_);
    const double x = ZipfHIntegralInverse(u, s);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > n) k = n;
    if (k - x <= zipf_s_param_ || u >= ZipfHIntegral(k + 0.5, s) - ZipfH(k, s)) {
      return static_cast<uint64_t>(k);
    }
  }
}

Op Workload::Next() {
  Op op;
  ++counter_;
  if (kit_rng_) {
    // Exactly the kit: pos first, then is_read, both from rand_r.
    op.pos = static_cast<uint64_t>(rand_r(&rand_r_seed_)) % spec_.n;
    const int r = rand_r(&rand_r_seed_);
    op.is_read = read_percent_ >= 0
                     ? (r % 100 < read_percent_)
                     : (static_cast<double>(r) / (RAND_MAX + 1.0) < spec_.read_ratio);
    return op;
  }
  switch (spec_.dist.kind) {
    case Distribution::Kind::kZipf:
      op.pos = ZipfRank() - 1;  // rank 1 (the hottest) is position 0
      break;
    case Distribution::Kind::kHotspot: {
      const bool hot = NextDouble() < spec_.dist.hot_requests;
      if (hot || hot_count_ == spec_.n) {
        op.pos = UniformBelow(hot_count_);
      } else {
        op.pos = hot_count_ + UniformBelow(spec_.n - hot_count_);
      }
      break;
    }
    case Distribution::Kind::kUniform:
      op.pos = UniformBelow(spec_.n);
      break;
  }
  op.is_read = NextDouble() < spec_.read_ratio;
  return op;
}

uint32_t Workload::DrawTextLength() {
  switch (spec_.text.kind) {
    case TextLength::Kind::kFixed:
      return spec_.text.fixed;
    case TextLength::Kind::kGamma: {
      // Marsaglia & Tsang (2000); for k < 1 use the k+1 boost.
      const double k = spec_.text.gamma_k;
      const double kk = k < 1 ? k + 1 : k;
      const double d = kk - 1.0 / 3.0;
      const double c = 1.0 / std::sqrt(9.0 * d);
      double v;
      while (true) {
        double x;
        do {
          // Box-Muller normal.
          const double u1 = 1.0 - NextDouble();
          const double u2 = NextDouble();
          x = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
          v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        const double u = 1.0 - NextDouble();
        if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) break;
      }
      double g = d * v;
      if (k < 1) g *= std::pow(1.0 - NextDouble(), 1.0 / k);
      const double len = std::round(g * spec_.text.gamma_theta);
      if (len < 1) return 1;
      if (len > kMaxTextLen) return kMaxTextLen;
      return static_cast<uint32_t>(len);
    }
    case TextLength::Kind::kKit:
      break;
  }
  return 0;
}

void Workload::FillRequest(const Op& op, Frame* frame) {
  char* out = frame->data();
  int head = std::snprintf(out, kFrameSize, "%llu-%d-", static_cast<unsigned long long>(op.pos),
                           op.is_read ? 1 : 0);
  const std::size_t room = kMaxTextLen - static_cast<std::size_t>(head);
  std::size_t body;
  if (spec_.text.kind == TextLength::Kind::kKit) {
    const int w = std::snprintf(out + head, room + 1, "String[%llu] has been modified by thread %u",
                                static_cast<unsigned long long>(op.pos), thread_);
    body = static_cast<std::size_t>(w) < room ? static_cast<std::size_t>(w) : room;
  } else {
    std::size_t want = DrawTextLength();
    if (want > room) want = room;
    char tag[64];
    const int t = std::snprintf(tag, sizeof tag, "String[%llu] t%u #%llu ",
                                static_cast<unsigned long long>(op.pos), thread_,
                                static_cast<unsigned long long>(counter_));
    const std::size_t tag_len = static_cast<std::size_t>(t);
    for (std::size_t i = 0; i < want; ++i) {
      out[head + i] = i < tag_len ? tag[i] : static_cast<char>('a' + (op.pos + counter_ + i) % 26);
    }
    body = want;
  }
  const std::size_t len = static_cast<std::size_t>(head) + body;
  std::memset(out + len, 0, kFrameSize - len);
}

}  // namespace kv
