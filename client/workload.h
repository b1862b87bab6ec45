// Workload: which request a client thread sends next. Pure and seeded.
//
// A WorkloadSpec describes the mix (read ratio, position distribution, write
// text length); a Workload is one thread's deterministic stream of operations
// drawn from it. Same spec + same seed + same thread index => same stream.
//
// The kit workload (the kit client's, docs/client.md) is the special case
// uniform + kit text: thread t seeds rand_r with t (when seed == 0) and per
// request draws pos = rand_r() % n, then is_read = rand_r() % 100 < 70, and
// writes "String[pos] has been modified by thread t". We call the libc rand_r
// itself, so the sequence is the kit's bit for bit.
//
// Other distributions use a 64-bit generator (xoshiro256**, seeded through
// SplitMix64 from seed and thread index).
//
// Thread safety: a WorkloadSpec is immutable after Parse*; share it freely.
// A Workload is used by one thread only.
#ifndef KV_CLIENT_WORKLOAD_H_
#define KV_CLIENT_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/protocol.h"
#include "common/status.h"

namespace kv {

struct Distribution {
  enum class Kind { kUniform, kZipf, kHotspot };
  Kind kind = Kind::kUniform;
  double zipf_s = 0.0;        // kZipf: exponent s > 0 (rank r has weight r^-s)
  double hot_keys = 0.0;      // kHotspot: fraction of positions that are hot
  double hot_requests = 0.0;  // kHotspot: fraction of requests that go to them

  // Parses "uniform", "zipf:S" (S > 0, <= 10) or "hotspot:KEYFRAC:REQFRAC"
  // (KEYFRAC in (0,1], REQFRAC in [0,1]), each number a decimal by the rule
  // of common/numbers.h. Returns InvalidArgument naming the problem otherwise.
  static Status Parse(std::string_view text, Distribution* out);
  // The canonical text form, e.g. "zipf:0.99".
  std::string ToString() const;
};

struct TextLength {
  enum class Kind { kKit, kFixed, kGamma };
  Kind kind = Kind::kKit;
  uint32_t fixed = 0;      // kFixed: length L (capped at the frame's room)
  double gamma_k = 0.0;    // kGamma: shape k > 0
  double gamma_theta = 0;  // kGamma: scale theta > 0

  // Parses "kit", "fixed:L" (L in 1..99) or "gamma:K:THETA" (both in
  // (0,1000]), numbers by the rule of common/numbers.h.
  static Status Parse(std::string_view text, TextLength* out);
  std::string ToString() const;
};

struct WorkloadSpec {
  uint64_t n = 1;           // array size, 1..10,000,000
  double read_ratio = 0.7;  // in [0,1]
  Distribution dist;
  TextLength text;
  uint64_t seed = 0;  // 0 = the kit's seeding (rand_r seed = thread)
};

struct Op {
  uint64_t pos = 0;
  bool is_read = true;
};

// One thread's stream of requests.
class Workload {
 public:
  // REQUIRES: spec.n >= 1; spec validated (Parse functions, ratio in [0,1]).
  Workload(const WorkloadSpec& spec, uint32_t thread_index);

  // The next operation; advances the stream.
  Op Next();

  // Fills *frame with the request for `op` (text "pos-is_read-body"). The
  // body is the kit sentence for kit text, else a deterministic filler of the
  // drawn length, capped so the whole text fits in 99 bytes. Reads carry the
  // same body as writes, as the kit client does.
  void FillRequest(const Op& op, Frame* frame);

  uint32_t thread_index() const { return thread_; }

 private:
  uint64_t NextU64();   // xoshiro256**
  double NextDouble();  // uniform in [0,1)
  uint64_t UniformBelow(uint64_t bound);
  uint64_t ZipfRank();  // 1..n, rejection-inversion (Hoermann & Derflinger)
  uint32_t DrawTextLength();

  const WorkloadSpec spec_;
  const uint32_t thread_;
  bool kit_rng_;  // use rand_r (uniform distribution)
  unsigned int rand_r_seed_;
  int read_percent_;        // >= 0 when read_ratio is a whole percentage
  uint64_t s_[4] = {};      // xoshiro state
  uint64_t counter_ = 0;    // requests generated, used in filler text
  uint64_t hot_count_ = 0;  // kHotspot: number of hot positions
  // Zipf constants.
  double zipf_h_x1_ = 0, zipf_h_n_ = 0, zipf_s_param_ = 0;
};

}  // namespace kv

#endif  // KV_CLIENT_WORKLOAD_H_
