#include "client/workload.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <utility>

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

// The parameters of a --dist or --text-len value, in the order written.
using Params = std::array<double, 2>;

// One form of a --dist or --text-len value: "name" alone, or "name:P1" or
// "name:P1:P2". Distribution and TextLength both parse and print their
// values through a table of these, one row per Kind, in Kind order.
struct Form {
  std::string_view name;
  std::size_t params;  // how many of Params it has: 0, 1 or 2
  bool whole;          // the parameters are whole numbers (else real)
  bool (*in_range)(const Params& p);
  std::string_view rule;  // what a refusal of bad parameters says
};

std::size_t ParamCount(const Form& form) { return std::min(form.params, Params().size()); }

// The form's parameters in `text` ("A" or "A:B") into *p, each by the number
// rule (numbers.h; no sign: no parameter is negative), then its range check.
bool ParseParams(std::string_view text, const Form& form, Params* p) {
  const std::size_t count = ParamCount(form);
  for (std::size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    const std::size_t colon = text.find(':');
    if ((colon == std::string_view::npos) != last) return false;
    const std::string_view item = text.substr(0, colon);
    uint64_t whole = 0;
    const Status s =
        form.whole ? ParseUnsigned(item, 0, UINT64_MAX, &whole)
                   : ParseDecimalDouble(item, 0, std::numeric_limits<double>::max(), &(*p)[i]);
    if (!s.ok()) return false;
    if (form.whole) (*p)[i] = static_cast<double>(whole);
    text.remove_prefix(last ? text.size() : colon + 1);
  }
  return form.in_range == nullptr || form.in_range(*p);
}

// "<what>, got '<text>'": a refused --dist or --text-len.
Status Refused(std::string_view what, std::string_view text) {
  std::string m(what);
  m += ", got '";
  m += text;
  m += '\'';
  return Status::InvalidArgument(std::move(m));
}

// Which of `forms` `text` spells (its index in *which, its parameters in
// *p), or the refusal: the form's rule when its parameters are bad,
// `must_be` when no form's name matches.
Status ParseForm(std::span<const Form> forms, std::string_view must_be, std::string_view text,
                 std::size_t* which, Params* p) {
  for (std::size_t i = 0; i < forms.size(); ++i) {
    const Form& form = forms[i];
    if (!text.starts_with(form.name)) continue;
    const std::string_view rest = text.substr(form.name.size());
    if (form.params == 0 ? !rest.empty() : !rest.starts_with(':')) continue;
    if (!ParseParams(rest.substr(form.params == 0 ? 0 : 1), form, p)) {
      return Refused(form.rule, text);
    }
    *which = i;
    return Status::OK();
  }
  return Refused(must_be, text);
}

// The canonical text of a value: the form's name and its parameters (%g).
std::string FormText(const Form& form, const Params& p) {
  std::string text(form.name);
  for (std::size_t i = 0; i < ParamCount(form); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ":%g", p[i]);
    text += buf;
  }
  return text;
}

constexpr Form kDistributions[] = {
    {"uniform", 0, false, nullptr, ""},
    {"zipf", 1, false, [](const Params& p) { return p[0] > 0 && p[0] <= 10; },
     "--dist zipf:S needs 0 < S <= 10"},
    {"hotspot", 2, false, [](const Params& p) { return p[0] > 0 && p[0] <= 1 && p[1] <= 1; },
     "--dist hotspot:KEYFRAC:REQFRAC needs 0 < KEYFRAC <= 1 and 0 <= REQFRAC <= 1"},
};
static_assert(std::size(kDistributions) ==
              1 + static_cast<std::size_t>(Distribution::Kind::kHotspot));

constexpr Form kTextLengths[] = {
    {"kit", 0, false, nullptr, ""},
    {"fixed", 1, true, [](const Params& p) { return p[0] >= 1 && p[0] <= kMaxTextLen; },
     "--text-len fixed:L needs 1 <= L <= 99"},
    {"gamma", 2, false,
     [](const Params& p) { return p[0] > 0 && p[0] <= 1000 && p[1] > 0 && p[1] <= 1000; },
     "--text-len gamma:K:THETA needs 0 < K, THETA <= 1000"},
};
static_assert(std::size(kTextLengths) == 1 + static_cast<std::size_t>(TextLength::Kind::kGamma));

// Helpers of the rejection-inversion Zipf sampler (Hoermann & Derflinger,
// "Rejection-inversion to generate variates from monotone discrete
// distributions", 1996; same formulation as Apache Commons RNG, which calls
// them helper1 and helper2). Each is exact where x is not near 0 and a Taylor
// series where the quotient would lose its digits.
double Log1pOverX(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x
                             : 1 + x * 0.5 * (1 + x * (1.0 / 3.0) * (1 + 0.25 * x));
}
double ZipfH(double x, double s) { return std::exp(-s * std::log(x)); }
double ZipfHIntegral(double x, double s) {
  const double log_x = std::log(x);
  return Expm1OverX((1 - s) * log_x) * log_x;
}
double ZipfHIntegralInverse(double x, double s) {
  double t = x * (1 - s);
  if (t < -1) t = -1;  // numerical safety
  return std::exp(Log1pOverX(t) * x);
}

}  // namespace

Status Distribution::Parse(std::string_view text, Distribution* out) {
  std::size_t which = 0;
  Params p{};
  if (Status s =
          ParseForm(kDistributions, "--dist must be uniform, zipf:S or hotspot:KEYFRAC:REQFRAC",
                    text, &which, &p);
      !s.ok()) {
    return s;
  }
  Distribution d;
  // ParseForm's index is below the table's size, and the table lists Kind's values in order.
  // NOLINTNEXTLINE(clang-analyzer-optin.core.EnumCastOutOfRange)
  d.kind = static_cast<Kind>(which);
  if (d.kind == Kind::kZipf) d.zipf_s = p[0];
  if (d.kind == Kind::kHotspot) {
    d.hot_keys = p[0];
    d.hot_requests = p[1];
  }
  *out = d;
  return Status::OK();
}

std::string Distribution::ToString() const {
  const Params p = {kind == Kind::kZipf ? zipf_s : hot_keys, hot_requests};
  return FormText(kDistributions[static_cast<std::size_t>(kind)], p);
}

Status TextLength::Parse(std::string_view text, TextLength* out) {
  std::size_t which = 0;
  Params p{};
  if (Status s = ParseForm(kTextLengths, "--text-len must be kit, fixed:L or gamma:K:THETA", text,
                           &which, &p);
      !s.ok()) {
    return s;
  }
  TextLength t;
  // NOLINTNEXTLINE(clang-analyzer-optin.core.EnumCastOutOfRange): as in Distribution::Parse
  t.kind = static_cast<Kind>(which);
  if (t.kind == Kind::kFixed) t.fixed = static_cast<uint32_t>(p[0]);
  if (t.kind == Kind::kGamma) {
    t.gamma_k = p[0];
    t.gamma_theta = p[1];
  }
  *out = t;
  return Status::OK();
}

std::string TextLength::ToString() const {
  const Params p = {kind == Kind::kFixed ? static_cast<double>(fixed) : gamma_k, gamma_theta};
  return FormText(kTextLengths[static_cast<std::size_t>(kind)], p);
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

namespace {

// The request text is formatted once per request: with snprintf, that was
// most of the instructions the client spends on a request, so it is
// composed by hand (std::to_chars) into the same bytes.
char* Put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* PutDecimal(char* p, uint64_t v) {
  constexpr int kDigits = std::numeric_limits<uint64_t>::digits10 + 1;
  return std::to_chars(p, p + kDigits, v).ptr;
}

}  // namespace

void Workload::FillRequest(const Op& op, Frame* frame) {
  char* out = frame->data();
  char* p = PutDecimal(out, op.pos);
  p = Put(p, op.is_read ? "-1-" : "-0-");
  const auto head = static_cast<std::size_t>(p - out);
  const std::size_t room = kMaxTextLen - head;
  // Longer than any text below: two 20-digit numbers and the words.
  char text[96];
  std::size_t body;
  if (spec_.text.kind == TextLength::Kind::kKit) {
    char* t = PutDecimal(Put(text, "String["), op.pos);
    t = PutDecimal(Put(t, "] has been modified by thread "), thread_);
    body = std::min(static_cast<std::size_t>(t - text), room);
    std::memcpy(out + head, text, body);
  } else {
    std::size_t want = DrawTextLength();
    if (want > room) want = room;
    char* t = PutDecimal(Put(text, "String["), op.pos);
    t = PutDecimal(Put(t, "] t"), thread_);
    t = Put(PutDecimal(Put(t, " #"), counter_), " ");
    const auto tag_len = static_cast<std::size_t>(t - text);
    for (std::size_t i = 0; i < want; ++i) {
      out[head + i] = i < tag_len ? text[i] : static_cast<char>('a' + (op.pos + counter_ + i) % 26);
    }
    body = want;
  }
  const std::size_t len = head + body;
  std::memset(out + len, 0, kFrameSize - len);
}

}  // namespace kv
